"""A full check's /workspace: a fresh tmpfs per run, sized to its checkout plus a fixed allowance.

A host directory has no quota, so a check could fill the host's disk. A tmpfs mounted on the
host (then bound into the container) has a size and an inode count, writes nothing to disk,
and its pages are charged to the memory cgroup of the process that writes them: what the
check writes counts against its own memory limit. The trusted copy of the checkout is done
first, then the mount is shrunk to what the copy used plus the allowance, so a large checkout
never eats the space the check may write. Forkhorse stays able to read the mount after the
check exits, which is how a full workspace is detected.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
from pathlib import Path

from forkhorse.domain.limits import EXPORT, ContainerLimits

_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_REMOUNT = 0x20
_MNT_DETACH = 0x2
_SOURCE = b"forkhorse-workspace"
# A workspace with less than this left is full: tmpfs refuses a write it cannot fit whole.
_FULL_MARGIN_BYTES = 1024 * 1024


class WorkspaceUnavailable(OSError):
    """The workspace tmpfs could not be mounted (Forkhorse must run as root locally)."""


def _libc_call(name: str, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        error = ctypes.get_errno()
        raise WorkspaceUnavailable(error, f"{name}: {os.strerror(error)}")


def _mount_tmpfs(target: Path, options: str, flags: int = 0) -> None:
    _libc_call(
        "mount", _SOURCE, str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | flags,
        options.encode(),
    )  # fmt: skip


def _used(target: Path) -> tuple[int, int]:
    """Bytes and inodes in use on the mount."""
    stats = os.statvfs(target)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize, stats.f_files - stats.f_ffree


def create_workspace(checkout: Path, target: Path, uid: int, limits: ContainerLimits) -> None:
    """Mount a fresh tmpfs at `target`, copy the checkout into it, give it to `uid`, and
    leave exactly `limits.workspace_bytes` and `limits.inodes` free for the check."""
    target.mkdir(mode=0o700)
    ownership = f"mode=0755,uid={uid},gid={uid}"
    _mount_tmpfs(
        target,
        f"size={EXPORT.bytes + limits.workspace_bytes},"
        f"nr_inodes={EXPORT.paths + limits.inodes},{ownership}",
    )
    shutil.copytree(checkout, target, symlinks=True, dirs_exist_ok=True)
    for path in target.rglob("*"):
        os.lchown(path, uid, uid)
    used_bytes, used_inodes = _used(target)
    _mount_tmpfs(
        target,
        f"size={used_bytes + limits.workspace_bytes},"
        f"nr_inodes={used_inodes + limits.inodes},{ownership}",
        _MS_REMOUNT,
    )


def workspace_is_full(target: Path) -> bool:
    """Whether the check used up its workspace (read on the host after it exited)."""
    try:
        stats = os.statvfs(target)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < _FULL_MARGIN_BYTES or stats.f_favail == 0


def remove_workspace(target: Path) -> None:
    """Unmount the tmpfs (its pages are freed) so the run directory can be removed."""
    if os.path.ismount(target):
        with contextlib.suppress(WorkspaceUnavailable):
            _libc_call("umount2", str(target).encode(), _MNT_DETACH)
