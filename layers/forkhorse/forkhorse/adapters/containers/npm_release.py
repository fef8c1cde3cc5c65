"""npm for the default image: its release tarball from the npm registry, pinned by version and
integrity, cached once per user and unpacked into the rootfs.

Debian's `npm` package depends on some 400 `node-*` packages, whose unpacking was more than
half of the image's build. npm's release bundles its dependencies in one tarball, and Node's
own images ship npm that way.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from forkhorse.ports.containers import ImageUnresolved

NPM_VERSION = "10.9.2"  # npm 10 runs on bookworm's Node 18; npm 11 needs Node 20
NPM_TARBALL = f"https://registry.npmjs.org/npm/-/npm-{NPM_VERSION}.tgz"
NPM_INTEGRITY = (  # the registry's `dist.integrity` for that version
    "sha512-iriPEPIkoMYUy3F6f3wwSZAU93E0Eg6cHwIR6jzzOXWSy+SD/rOODEs74cVONHKSx2obXtuUoyidVEhISrisgQ=="
)
FETCH_TIMEOUT_SECONDS = 60
MAX_TARBALL_BYTES = 16 * 1024 * 1024  # the pinned one is 2.6 MiB
# A check never reads npm's documentation; the licence files stay.
_SKIPPED = ("docs/", "man/")
_COMMANDS = {"npm": "npm-cli.js", "npx": "npx-cli.js"}


def npm_tarball(cache_dir: Path, url: str = NPM_TARBALL) -> Path:
    """The pinned release in the user's cache, fetched once; `ImageUnresolved` when it cannot
    be fetched or its bytes are not the pinned ones."""
    target = cache_dir / "npm" / f"npm-{NPM_VERSION}.tgz"
    if target.is_file() and _pinned(target.read_bytes()):
        return target
    data = _fetch(url)
    if not _pinned(data):
        raise ImageUnresolved(f"npm {NPM_VERSION} from {url} is not the pinned release.")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as partial:
        partial.write(data)
    os.replace(partial.name, target)
    return target


def install_npm(rootfs: Path, tarball: Path) -> None:
    """Unpack the release as Node's global `npm` module, with `npm` and `npx` on the PATH."""
    destination = rootfs / "usr/lib/node_modules/npm"
    with tarfile.open(tarball, "r:gz") as archive:
        members = []
        for member in archive.getmembers():
            name = member.name.removeprefix("package/")
            if name != member.name and not name.startswith(_SKIPPED):
                member.name = name
                members.append(member)
        archive.extractall(destination, members=members, filter="data")
    for command, script in _COMMANDS.items():
        link = rootfs / "usr/bin" / command
        link.unlink(missing_ok=True)
        link.symlink_to(f"../lib/node_modules/npm/bin/{script}")


def _pinned(data: bytes) -> bool:
    algorithm, _, expected = NPM_INTEGRITY.partition("-")
    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode() == expected


def _fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310
            data: bytes = response.read(MAX_TARBALL_BYTES + 1)
    except (urllib.error.URLError, OSError) as failed:
        raise ImageUnresolved(f"Could not fetch npm {NPM_VERSION} from {url}: {failed}") from None
    if len(data) > MAX_TARBALL_BYTES:
        raise ImageUnresolved(f"npm {NPM_VERSION} from {url} is larger than any npm release.")
    return data
