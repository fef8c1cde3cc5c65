"""Shared libraries gathered into one host directory per sandbox directory, bound whole.

bubblewrap reads the whole mount table for every bind, so each bind costs every quick check
about 70 µs of set-up; the Python runtime's ten or so libraries in /lib/<triplet> cost more
than a twelfth of a bare interpreter start. A stage holds exactly those libraries, under the
names the sandbox shows, as hard links (copies where the host refuses links), so the sandbox
sees the same files through one bind.

Stages live under the user's cache directory, named after the files they hold (path, inode,
size, mtime), so a library update stages anew and nothing needs removing; they are built
aside and renamed into place, so concurrent processes share one. Where no stage can be made,
each library is bound on its own, as before.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

# A directory with a single library gains nothing from a stage.
MIN_STAGED_LIBRARIES = 2
STAGE_MODE = 0o755  # the check's uid must read the libraries it loads after dropping


def stage_libraries(libraries: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(sandbox directory, host stage) for each sandbox directory that holds enough of these
    libraries (their paths in the sandbox, each a symlink or file on the host)."""
    root = _stage_root()
    if root is None:
        return ()
    by_directory: dict[str, list[str]] = {}
    for library in libraries:
        by_directory.setdefault(os.path.dirname(library), []).append(library)
    stages = []
    for directory, members in sorted(by_directory.items()):
        if len(members) >= MIN_STAGED_LIBRARIES:
            stage = _stage(root, members)
            if stage is not None:
                stages.append((directory, stage))
    return tuple(stages)


def _stage_root() -> Path | None:
    """The directory holding the stages: ours, and writable by nobody else, or none."""
    try:
        root = Path.home() / ".cache" / "forkhorse" / "quick-libraries"
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = root.lstat()
    except (OSError, RuntimeError):  # RuntimeError: no home directory
        return None
    owned = stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid()
    return root if owned and not status.st_mode & 0o022 else None


def _stage(root: Path, libraries: list[str]) -> str | None:
    sources = [(os.path.basename(path), os.path.realpath(path)) for path in libraries]
    try:
        target = root / _stage_name(sources)
        if not target.is_dir():
            _build(root, target, sources)
        return str(target)
    except OSError:
        return None


def _stage_name(sources: list[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for name, source in sources:
        status = os.stat(source)
        identity = f"{status.st_dev}:{status.st_ino}:{status.st_size}:{status.st_mtime_ns}"
        digest.update(f"{name}\0{source}\0{identity}\n".encode())
    return digest.hexdigest()[:32]


def _build(root: Path, target: Path, sources: list[tuple[str, str]]) -> None:
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        for name, source in sources:
            try:
                os.link(source, building / name)
            except OSError:  # another file system, or protected_hardlinks for a non-owner
                shutil.copy2(source, building / name)
        building.chmod(STAGE_MODE)
        building.rename(target)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
        if not target.is_dir():  # else another process staged the same libraries first
            raise
