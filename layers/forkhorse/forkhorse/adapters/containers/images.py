"""Local images: built from Debian packages with `podman import`, never pulled from a registry.

The registry file in the state directory maps deployment image names (`default`, `busybox`)
to immutable `localhost/forkhorse/<name>@sha256:` references. It is deployment
configuration: only the operator's `forkhorse image build` writes it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman, PodmanFailed
from forkhorse.ports.containers import ImageUnresolved, require_pinned

DEFAULT_IMAGE = "default"
BUSYBOX_IMAGE = "busybox"
IMAGE_NAMES = (DEFAULT_IMAGE, BUSYBOX_IMAGE)  # what `forkhorse image build` can build
REGISTRY_FILE = "images.json"
LOCAL_REPOSITORY = "localhost/forkhorse"
CHECK_UID = 1000
# Debian packages of the default image (sh and coreutils come with minbase).
DEFAULT_PACKAGES = ("nodejs", "npm", "git", "ca-certificates")
HOST_DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
BUSYBOX_BINARY = Path("/bin/busybox")  # Debian's busybox-static

_PASSWD = f"root:x:0:0:root:/root:/bin/sh\ncheck:x:{CHECK_UID}:{CHECK_UID}:check:/tmp:/bin/sh\n"
_GROUP = f"root:x:0:\ncheck:x:{CHECK_UID}:\n"
_COMMON_CHANGES = (
    "ENV HOME=/tmp",
    "WORKDIR /workspace",
    'CMD ["/bin/sh"]',
)
_DEFAULT_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    # No network in a check: never let npm try to reach its registry on its own.
    "ENV NPM_CONFIG_UPDATE_NOTIFIER=false",
    "ENV NPM_CONFIG_FUND=false",
    "ENV NPM_CONFIG_AUDIT=false",
    *_COMMON_CHANGES,
)

Progress = Callable[[str], None]


class ImageRegistry:
    """Image names to pinned references, stored as JSON in the state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / REGISTRY_FILE

    def entries(self) -> dict[str, str]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}  # missing or corrupt: every name is unresolved, so checks fail closed
        if not isinstance(document, dict):
            return {}
        return {str(name): str(ref) for name, ref in document.items()}

    def resolve(self, name: str) -> str:
        """The pinned reference of a configured name; anything else is `ImageUnresolved`."""
        reference = self.entries().get(name)
        if reference is None:
            raise ImageUnresolved()
        return require_pinned(reference)

    def record(self, name: str, reference: str) -> None:
        """Atomically record (or replace) one name's reference."""
        entries = self.entries() | {name: require_pinned(reference)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=self.path.parent, prefix=".images-", delete=False, encoding="utf-8"
        ) as temporary:
            json.dump(entries, temporary, indent=2, sort_keys=True)
        os.replace(temporary.name, self.path)


class LocalImages:
    """The operator's images under one home: build them, list them, see which are present."""

    def __init__(self, registry: ImageRegistry, podman: Podman, cache_dir: Path) -> None:
        self.registry = registry
        self._podman = podman
        self._cache_dir = cache_dir

    def present(self, reference: str) -> bool:
        return image_present(self._podman, reference)

    def build(self, name: str, progress: Progress = print) -> str:
        """Build one of `IMAGE_NAMES` and record its reference; `ContainerError` if it fails."""
        if name == DEFAULT_IMAGE:
            progress("Building the default image (Debian nodejs, npm, git); about a minute.")
            return build_default_image(self.registry, self._podman, self._cache_dir, progress)
        if name == BUSYBOX_IMAGE:
            return build_busybox_image(self.registry, self._podman)
        raise ImageUnresolved(f"{name} is not an image Forkhorse builds.")


def image_present(podman: Podman, reference: str) -> bool:
    return podman.run("image", "exists", reference).returncode == 0


def import_rootfs(podman: Podman, name: str, tarball: Path, changes: tuple[str, ...]) -> str:
    """`podman import` a rootfs tarball; return the image's `@sha256:` reference."""
    tag = f"{LOCAL_REPOSITORY}/{name}:latest"
    change_flags = [flag for change in changes for flag in ("--change", change)]
    completed = podman.run("import", *change_flags, str(tarball), tag, timeout=600)
    if completed.returncode != 0:
        raise PodmanFailed(("import", name), completed.stderr)
    digest = podman.output("image", "inspect", "--format", "{{.Digest}}", tag).strip()
    return require_pinned(f"{LOCAL_REPOSITORY}/{name}@{digest}")


# --- busybox: the tests' image, about a second --------------------------------------------


def busybox_rootfs_tar(busybox: Path = BUSYBOX_BINARY) -> bytes:
    """A rootfs with the static busybox binary and one symlink per applet (mtime 0)."""
    if not busybox.is_file():
        raise ImageUnresolved(f"{busybox} is missing: install busybox-static.")
    applets = subprocess.run(
        [str(busybox), "--list"], capture_output=True, check=True, text=True
    ).stdout.split()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in ("bin", "etc", "tmp", "workspace"):
            _add_dir(tar, directory, 0o1777 if directory == "tmp" else 0o755)
        _add_file(tar, "etc/passwd", _PASSWD.encode())
        _add_file(tar, "etc/group", _GROUP.encode())
        tar.add(busybox, arcname="bin/busybox", filter=_root_owned)
        for applet in applets:
            if applet != "busybox":
                _add_symlink(tar, f"bin/{applet}", "busybox")
    return buffer.getvalue()


def build_busybox_image(registry: ImageRegistry, podman: Podman) -> str:
    with tempfile.TemporaryDirectory(prefix="forkhorse-busybox-") as scratch:
        tarball = Path(scratch) / "rootfs.tar"
        tarball.write_bytes(busybox_rootfs_tar())
        changes = ("ENV PATH=/bin", *_COMMON_CHANGES)
        reference = import_rootfs(podman, BUSYBOX_IMAGE, tarball, changes)
    registry.record(BUSYBOX_IMAGE, reference)
    return reference


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = info.mtime = 0  # deterministic: rebuilding gives the same digest
    info.uname = info.gname = "root"
    return info


def _add_dir(tar: tarfile.TarFile, name: str, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _add_symlink(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
    tar.addfile(info)


# --- default: Debian's nodejs, npm, git, CA certificates, sh and coreutils ----------------


def build_default_image(
    registry: ImageRegistry, podman: Podman, cache_dir: Path, progress: Progress = print
) -> str:
    """debootstrap a minbase rootfs, add the packages, `podman import` it (about a minute)."""
    for tool in ("debootstrap", "chroot", "tar"):
        if shutil.which(tool) is None:
            raise ImageUnresolved(f"{tool} is missing: install debootstrap (apt-get).")
    started = time.monotonic()
    debs = cache_dir / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    with scratch_dir(cache_dir) as scratch:
        rootfs = scratch / "rootfs"
        progress("[1/4] debootstrap: a minimal Debian rootfs (about 30 s)")
        stream(["debootstrap", "--variant=minbase", f"--cache-dir={debs}",
                 host_suite(), str(rootfs)], progress)  # fmt: skip
        progress(f"[2/4] apt-get install {' '.join(DEFAULT_PACKAGES)} (about 30 s)")
        _install_packages(rootfs, progress)
        progress("[3/4] podman import")
        tarball = scratch / "rootfs.tar"
        stream(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."], progress)
        reference = import_rootfs(podman, DEFAULT_IMAGE, tarball, _DEFAULT_CHANGES)
    progress("[4/4] checking the image")
    versions = podman.output(
        "run", "--rm", "--pull", "never", "--network", "none", *ULIMIT_FLAGS, reference,
        "sh", "-c", "node --version && npm --version && git --version",
    )  # fmt: skip
    registry.record(DEFAULT_IMAGE, reference)
    elapsed = time.monotonic() - started
    progress(f"Built {reference} in {elapsed:.0f} s ({' '.join(versions.split())}).")
    return reference


@contextmanager
def scratch_dir(cache_dir: Path) -> Iterator[Path]:
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=cache_dir))
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def host_suite() -> str:
    """The host's Debian release (these machines are bookworm), so its apt sources fit."""
    for line in Path("/etc/os-release").read_text(encoding="utf-8").splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return "bookworm"


def _install_packages(rootfs: Path, progress: Progress) -> None:
    # Same Debian suites as the host (security updates included), same resolver.
    if HOST_DEBIAN_SOURCES.is_file():
        shutil.copy(HOST_DEBIAN_SOURCES, rootfs / "etc/apt/sources.list.d/debian.sources")
        (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    shutil.copy("/etc/resolv.conf", rootfs / "etc/resolv.conf")
    script = (
        "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
        f"apt-get install -y -qq --no-install-recommends {' '.join(DEFAULT_PACKAGES)}; "
        "apt-get clean; rm -rf /var/lib/apt/lists/*"
    )
    stream(["chroot", str(rootfs), "sh", "-c", script], progress)
    (rootfs / "etc/resolv.conf").write_text("", encoding="utf-8")
    with (rootfs / "etc/passwd").open("a", encoding="utf-8") as passwd:
        passwd.write(f"check:x:{CHECK_UID}:{CHECK_UID}:check:/tmp:/bin/sh\n")
    with (rootfs / "etc/group").open("a", encoding="utf-8") as group:
        group.write(f"check:x:{CHECK_UID}:\n")
    (rootfs / "workspace").mkdir(exist_ok=True)


def stream(command: list[str], progress: Progress) -> None:
    """Run a build step, passing its output lines on as progress."""
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            progress(f"      {line.rstrip()}")
    if process.returncode != 0:
        raise ImageUnresolved(f"Image build step failed: {command[0]} exited {process.returncode}.")
