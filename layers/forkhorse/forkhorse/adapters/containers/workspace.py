"""A full check's /workspace: the run's exported checkout, shared read-only by every full check
of the run, under a fresh overlay whose writable layer is a tmpfs per check.

The export is made once per run (`runner.workflow.steps.exported_checkout`); nothing copies it per
check. Podman mounts it as the overlay's lower layer, which a check can never change: its
writes (new files, and copies of the files it changes) go to the upper layer. A host
directory has no quota, so a check could fill the host's disk; the upper layer is a tmpfs
mounted on the host, with a size and an inode count, that writes nothing to disk and whose
pages are charged to the memory cgroup of the process that writes them: what the check
writes counts against its own memory limit. Forkhorse stays able to read the mount after the
check exits, which is how a full workspace is detected.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path

from forkhorse.domain.limits import ContainerLimits

_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MNT_DETACH = 0x2
_SOURCE = b"forkhorse-workspace"
# A workspace with less than this left is full: tmpfs refuses a write it cannot fit whole.
_FULL_MARGIN_BYTES = 1024 * 1024
_OVERLAY_DIRECTORIES = 2  # the upper and work directories overlayfs needs


class WorkspaceUnavailable(OSError):
    """The workspace tmpfs could not be mounted (Forkhorse must run as root locally)."""


def _libc_call(name: str, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        error = ctypes.get_errno()
        raise WorkspaceUnavailable(error, f"{name}: {os.strerror(error)}")


def _mount_tmpfs(target: Path, options: str) -> None:
    _libc_call(
        "mount", _SOURCE, str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()
    )


def share_checkout(checkout: Path, uid: int) -> None:
    """Hand the run's export to the check user, once per run: the check may change any file
    of its overlay (podman gives the overlay's root the owner and mode of the export's). The
    export's parent directory is root-only (`runner.workflow.steps.exported_checkout`), so no host
    user with the check's uid can reach the files the run's checks share."""
    for path in (checkout, *checkout.rglob("*")):
        os.lchown(path, uid, uid)
    checkout.chmod(0o755)


def overlay_directories(target: Path) -> tuple[Path, Path]:
    """The overlay's upper (what the check wrote) and work directories on the workspace."""
    return target / "upper", target / "work"


def create_workspace(target: Path, uid: int, limits: ContainerLimits) -> None:
    """Mount a fresh tmpfs at `target` with exactly `limits.workspace_bytes` and
    `limits.inodes` for the check, holding the overlay's upper and work directories."""
    target.mkdir(mode=0o700)
    _mount_tmpfs(
        target,
        f"size={limits.workspace_bytes},nr_inodes={limits.inodes + _OVERLAY_DIRECTORIES},"
        f"mode=0755,uid={uid},gid={uid}",
    )
    for directory in overlay_directories(target):
        directory.mkdir(mode=0o755)
        os.chown(directory, uid, uid)


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
