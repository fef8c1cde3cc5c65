"""Library stages: one host directory per sandbox library directory, shared, rebuilt on change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from forkhorse.adapters.sandbox.library_stage import stage_libraries


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host with two libraries behind versioned symlinks, and a home of its own."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    libraries = tmp_path / "usr/lib"
    libraries.mkdir(parents=True)
    for name, content in (("liba.so.1", b"a"), ("libb.so.2", b"b")):
        (libraries / f"{name}.0.7").write_bytes(content)
        (libraries / name).symlink_to(f"{name}.0.7")
    return libraries


def _libraries(host: Path) -> tuple[str, ...]:
    return (str(host / "liba.so.1"), str(host / "libb.so.2"))


def test_a_stage_holds_the_libraries_under_their_sandbox_names(host: Path) -> None:
    ((directory, stage),) = stage_libraries(_libraries(host))
    assert directory == str(host)
    assert sorted(os.listdir(stage)) == ["liba.so.1", "libb.so.2"]
    assert (Path(stage) / "liba.so.1").read_bytes() == b"a"
    assert os.path.samefile(Path(stage) / "libb.so.2", host / "libb.so.2.0.7")  # a hard link
    assert os.stat(stage).st_mode & 0o777 == 0o755
    assert os.stat(Path(stage).parent).st_mode & 0o777 == 0o700


def test_the_stage_is_shared_until_a_library_changes(host: Path) -> None:
    first = stage_libraries(_libraries(host))
    assert stage_libraries(_libraries(host)) == first
    (host / "libb.so.2.0.7").unlink()
    (host / "libb.so.2.0.7").write_bytes(b"updated")
    ((_, updated),) = stage_libraries(_libraries(host))
    assert updated != first[0][1]
    assert (Path(updated) / "libb.so.2").read_bytes() == b"updated"
    assert not [name for name in os.listdir(Path(updated).parent) if name.startswith(".")]


def test_a_lone_library_is_not_staged(host: Path) -> None:
    assert stage_libraries((str(host / "liba.so.1"),)) == ()


def test_no_stage_under_a_cache_others_can_write(host: Path, tmp_path: Path) -> None:
    root = tmp_path / "home/.cache/forkhorse/quick-libraries"
    root.mkdir(parents=True)
    root.chmod(0o777)
    assert stage_libraries(_libraries(host)) == ()
