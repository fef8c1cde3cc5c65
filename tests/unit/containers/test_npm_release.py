"""npm's pinned release for the default image: fetched once per user, refused unless its bytes
are the pinned ones, bounded in size, and unpacked as Node's global npm (no docs, no way out
of its directory). Release bytes come from `file://` URLs: no network."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from forkhorse.adapters.containers import npm_release
from forkhorse.adapters.containers.npm_release import install_npm, npm_tarball
from forkhorse.ports.containers import ImageUnresolved

FILES = {
    "package/package.json": b'{"name": "npm"}',
    "package/bin/npm-cli.js": b"#!/usr/bin/env node\n",
    "package/bin/npx-cli.js": b"#!/usr/bin/env node\n",
    "package/node_modules/abbrev/index.js": b"module.exports = 1\n",
    "package/docs/output/commands/npm.html": b"<html></html>",
    "package/man/man1/npm.1": b".TH NPM",
    "package/LICENSE": b"The Artistic License 2.0",
}


def _release(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if "/bin/" in name else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


@pytest.fixture
def release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, str]:
    """A release file, pinned as if it were npm's."""
    data = _release(FILES)
    path = tmp_path / "served.tgz"
    path.write_bytes(data)
    monkeypatch.setattr(npm_release, "NPM_INTEGRITY", _integrity(data))
    return data, path.as_uri()


def test_the_pinned_release_is_fetched_once_and_then_read_from_the_cache(
    tmp_path: Path, release: tuple[bytes, str]
) -> None:
    data, url = release
    cached = npm_tarball(tmp_path / "cache", url)
    assert cached.read_bytes() == data
    Path(url.removeprefix("file://")).unlink()  # nothing to fetch any more
    assert npm_tarball(tmp_path / "cache", url) == cached


def test_a_corrupt_cache_is_fetched_again(tmp_path: Path, release: tuple[bytes, str]) -> None:
    data, url = release
    cached = npm_tarball(tmp_path / "cache", url)
    cached.write_bytes(b"truncated")
    assert npm_tarball(tmp_path / "cache", url).read_bytes() == data


def test_other_bytes_than_the_pinned_are_refused_and_not_cached(
    tmp_path: Path, release: tuple[bytes, str]
) -> None:
    _, url = release
    Path(url.removeprefix("file://")).write_bytes(_release({"package/evil.js": b"x"}))
    with pytest.raises(ImageUnresolved, match="is not the pinned release"):
        npm_tarball(tmp_path / "cache", url)
    assert not list((tmp_path / "cache").rglob("*.tgz"))


def test_an_unreachable_registry_names_what_it_could_not_fetch(tmp_path: Path) -> None:
    url = (tmp_path / "absent.tgz").as_uri()
    with pytest.raises(ImageUnresolved, match=r"^Could not fetch npm .* from file://"):
        npm_tarball(tmp_path / "cache", url)


def test_a_release_past_the_size_bound_is_refused_after_reading_only_the_bound(
    tmp_path: Path, release: tuple[bytes, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, url = release
    monkeypatch.setattr(npm_release, "MAX_TARBALL_BYTES", len(data) - 1)
    with pytest.raises(ImageUnresolved, match="larger than any npm release"):
        npm_tarball(tmp_path / "cache", url)


def test_it_unpacks_as_the_global_npm_without_docs_with_npm_and_npx_on_the_path(
    tmp_path: Path,
) -> None:
    rootfs, tarball = tmp_path / "rootfs", tmp_path / "npm.tgz"
    (rootfs / "usr/bin").mkdir(parents=True)
    tarball.write_bytes(_release(FILES))
    install_npm(rootfs, tarball)
    module = rootfs / "usr/lib/node_modules/npm"
    unpacked = sorted(str(path.relative_to(module)) for path in module.rglob("*") if path.is_file())
    assert unpacked == [
        "LICENSE", "bin/npm-cli.js", "bin/npx-cli.js", "node_modules/abbrev/index.js",
        "package.json",
    ]  # fmt: skip
    assert (module / "bin/npm-cli.js").stat().st_mode & 0o111
    for command, script in (("npm", "npm-cli.js"), ("npx", "npx-cli.js")):
        link = rootfs / "usr/bin" / command
        assert link.readlink() == Path(f"../lib/node_modules/npm/bin/{script}")
        assert link.resolve() == (module / "bin" / script).resolve()


def test_a_member_that_leaves_the_module_directory_is_refused(tmp_path: Path) -> None:
    rootfs, tarball = tmp_path / "rootfs", tmp_path / "npm.tgz"
    (rootfs / "usr/bin").mkdir(parents=True)
    tarball.write_bytes(_release({"package/../../../../escaped": b"x"}))
    with pytest.raises(tarfile.OutsideDestinationError):
        install_npm(rootfs, tarball)
    assert not list(tmp_path.rglob("escaped"))
