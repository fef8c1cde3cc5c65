"""Local images: a rootfs tarball built from Debian packages (or busybox), never pulled from a
registry (mmdebstrap for Debian's), made an image by `podman build FROM scratch`.

The registry file in the state directory maps deployment image names (`default`, `busybox`)
to immutable `localhost/forkhorse/<name>@sha256:` references. It is deployment
configuration: only the operator's `forkhorse image build` writes it.

Builds are reproducible: the tarball is sorted with fixed times and owners, and the image is
built with `--timestamp 0`, so the same inputs give the same `@sha256:` digest and an owner can
rebuild and compare what a receipt ran in. Each image carries a label with the hash of its
inputs; a build whose inputs match an image already in podman reuses it, whatever `--home`
asked. Package downloads are cached once per user (`$XDG_CACHE_HOME/forkhorse`).
"""

from __future__ import annotations

import hashlib
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
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from forkhorse.adapters.containers.npm_release import (
    NPM_INTEGRITY,
    NPM_VERSION,
    install_npm,
    npm_tarball,
)
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman, PodmanFailed
from forkhorse.adapters.node_release import binary_digest, pinned_node, pinned_version
from forkhorse.ports.containers import ContainerError, ImageUnresolved, require_pinned

DEFAULT_IMAGE = "default"
BUSYBOX_IMAGE = "busybox"
IMAGE_NAMES = (DEFAULT_IMAGE, BUSYBOX_IMAGE)  # what `forkhorse image build` can build
REGISTRY_FILE = "images.json"
LOCAL_REPOSITORY = "localhost/forkhorse"
CHECK_UID = 1000
# Debian packages of the default image (sh and coreutils come with minbase; libstdc++, which
# node links, with apt). node is the pinned Node 24 (`node_release`), the binary JavaScript
# quick checks run; npm comes from its own release (`npm_release`).
DEFAULT_PACKAGES = ("git", "ca-certificates")
HOST_DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's own tools, for mmdebstrap
# The user's apt caches, under the cache directory: packages, and the package lists.
APT_ARCHIVES, APT_LISTS = "apt-archives", "apt-lists"
BUSYBOX_BINARY = Path("/bin/busybox")  # Debian's busybox-static
INPUTS_LABEL = "org.forkhorse.inputs"
# Bump when the recipe changes in a way its listed inputs do not show.
RECIPE_VERSION = "5"
# Files whose content depends on when or where the build ran, not on its inputs.
_UNREPRODUCIBLE = (
    "var/log", "var/cache/apt/pkgcache.bin", "var/cache/apt/srcpkgcache.bin",
    "var/cache/debconf/templates.dat-old", "var/cache/ldconfig",
    "var/lib/apt/lists", "var/lib/dpkg/status-old", "var/lib/dpkg/diversions-old",
    "var/lib/dpkg/available-old", "etc/machine-id", "etc/hostname", "etc/resolv.conf",
    "var/lib/systemd",
)  # fmt: skip

# No manual pages, translations or documentation but the copyright notices: a check never
# reads them, and they are a sixth of the rootfs' bytes and files.
_SLIM = tuple(
    f"--dpkgopt={rule}"
    for rule in (
        "path-exclude=/usr/share/man/*", "path-exclude=/usr/share/locale/*",
        "path-include=/usr/share/locale/locale.alias", "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright", "path-exclude=/usr/share/info/*",
    )
)  # fmt: skip
# What decides the rootfs besides the suite, sources and packages (part of its inputs label).
_ROOTFS_FLAGS = (
    "--variant=minbase", "--mode=root", "--format=directory", "--dpkgopt=force-unsafe-io",
    *_SLIM, '--aptopt=Acquire::Languages "none"', "--skip=essential/unlink",
)  # fmt: skip
# What `--aptopt` and `--dpkgopt` leave in the rootfs.
_BUILD_SETTINGS = ("etc/apt/apt.conf.d/99mmdebstrap", "etc/dpkg/dpkg.cfg.d/99mmdebstrap")
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

    def build(self, name: str, progress: Progress = print, *, rebuild: bool = False) -> str:
        """Build one of `IMAGE_NAMES` and record its reference; `ContainerError` if it fails.

        An image built from the same inputs is reused unless `rebuild`."""
        if name == DEFAULT_IMAGE:
            progress(
                f"Building the default image (node {pinned_version()}, Debian git, "
                f"npm {NPM_VERSION})."
            )
            return build_default_image(
                self.registry, self._podman, self._cache_dir, progress, rebuild=rebuild
            )
        if name == BUSYBOX_IMAGE:
            return build_busybox_image(self.registry, self._podman, progress)
        raise ImageUnresolved(f"{name} is not an image Forkhorse builds.")


def image_present(podman: Podman, reference: str) -> bool:
    return podman.run("image", "exists", reference).returncode == 0


def user_cache_dir() -> Path:
    """One package and build cache per user, shared by every Forkhorse home."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).resolve() / "forkhorse"


def inputs_digest(*parts: str | bytes) -> str:
    """The hash an image is labelled with: everything that decides its content."""
    digest = hashlib.sha256(RECIPE_VERSION.encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def find_built(podman: Podman, name: str, inputs: str) -> str | None:
    """The pinned reference of an image already built from exactly these inputs, if any."""
    # No filter on the name: an image a later build untagged keeps its `name@digest`.
    digests = podman.output(
        "image", "ls", "--all", "--filter", f"label={INPUTS_LABEL}={inputs}",
        "--format", "{{.Digest}}",
    ).split()  # fmt: skip
    return require_pinned(f"{LOCAL_REPOSITORY}/{name}@{digests[0]}") if digests else None


def build_rootfs_image(
    podman: Podman, name: str, tarball: Path, changes: tuple[str, ...], inputs: str
) -> str:
    """`podman build` the rootfs tarball FROM scratch, with fixed timestamps and the inputs
    label; return the image's `@sha256:` reference (the same for the same tarball)."""
    containerfile = tarball.parent / "Containerfile"
    lines = ["FROM scratch", f"ADD {tarball.name} /", *changes, f"LABEL {INPUTS_LABEL}={inputs}"]
    containerfile.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tag = f"{LOCAL_REPOSITORY}/{name}:latest"
    completed = podman.run(
        "build", "--quiet", "--timestamp", "0", "--pull=never", "--network", "none",
        "--file", str(containerfile), "--tag", tag, str(tarball.parent), timeout=600,
    )  # fmt: skip
    if completed.returncode != 0:
        raise PodmanFailed(("build", name), completed.stderr)
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


def build_busybox_image(
    registry: ImageRegistry, podman: Podman, progress: Progress = lambda _: None
) -> str:
    rootfs = busybox_rootfs_tar()
    changes = ("ENV PATH=/bin", *_COMMON_CHANGES)
    inputs = inputs_digest(rootfs, *changes)
    reference = find_built(podman, BUSYBOX_IMAGE, inputs)
    if reference is not None:
        progress(f"Reusing {reference}: built from the same inputs.")
    else:
        with tempfile.TemporaryDirectory(prefix="forkhorse-busybox-") as scratch:
            tarball = Path(scratch) / "rootfs.tar"
            tarball.write_bytes(rootfs)
            reference = build_rootfs_image(podman, BUSYBOX_IMAGE, tarball, changes, inputs)
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


# --- default: the pinned node, Debian's git, CA certificates, sh and coreutils, npm's release


def default_image_inputs() -> str:
    """What decides the default image: the suite, its apt sources, packages and settings, and
    the pinned node binary."""
    sources = HOST_DEBIAN_SOURCES.read_bytes() if HOST_DEBIAN_SOURCES.is_file() else b""
    return inputs_digest(
        host_suite(),
        sources,
        *DEFAULT_PACKAGES,
        binary_digest(_node_binary()),
        *_ROOTFS_FLAGS,
        *_DEFAULT_CHANGES,
        NPM_VERSION,
        NPM_INTEGRITY,
    )


def build_default_image(
    registry: ImageRegistry,
    podman: Podman,
    cache_dir: Path,
    progress: Progress = print,
    *,
    rebuild: bool = False,
) -> str:
    """mmdebstrap a minbase rootfs with the packages, build it, unless an image from the same
    inputs is already in podman (`rebuild` builds anyway: a reproducible build then gives that
    image's digest again)."""
    inputs = default_image_inputs()
    known = None if rebuild else find_built(podman, DEFAULT_IMAGE, inputs)
    if known is not None:
        progress(f"Reusing {known}: built from the same inputs.")
        registry.record(DEFAULT_IMAGE, known)
        return known
    for tool in ("mmdebstrap", "tar"):
        if shutil.which(tool) is None:
            raise ImageUnresolved(f"{tool} is missing: install mmdebstrap (apt-get).")
    started = time.monotonic()
    with build_log(cache_dir, DEFAULT_IMAGE) as log, scratch_dir(cache_dir) as scratch:
        rootfs = scratch / "rootfs"
        stage = _stages(progress, log, 4)
        _default_rootfs(rootfs, cache_dir, log, stage)
        stage("podman build (reproducible: sorted tarball, fixed timestamps)")
        tarball = scratch / "rootfs.tar"
        _reproducible_tar(rootfs, tarball, log)
        reference = build_rootfs_image(podman, DEFAULT_IMAGE, tarball, _DEFAULT_CHANGES, inputs)
        stage("checking the image")
        versions = podman.output(
            "run", "--rm", "--pull", "never", "--network", "none", *ULIMIT_FLAGS, reference,
            "sh", "-c", "node --version && npm --version && git --version",
        )  # fmt: skip
    registry.record(DEFAULT_IMAGE, reference)
    elapsed = time.monotonic() - started
    progress(f"Built {reference} in {elapsed:.0f} s ({' '.join(versions.split())}).")
    return reference


def _default_rootfs(rootfs: Path, cache_dir: Path, log: TextIO, stage: Progress) -> None:
    """npm's pinned release (fetched first: a build that cannot have it fails at once), then
    minbase with the packages, then npm unpacked into it."""
    stage(f"npm {NPM_VERSION}: the pinned release from the npm registry, cached per user")
    npm = npm_tarball(cache_dir)
    node = _node_binary()
    stage(f"mmdebstrap: Debian {host_suite()} minbase with {' '.join(DEFAULT_PACKAGES)}")
    # Maintainer scripts that write dates take this one, not the build's. The system's own
    # tools: mmdebstrap runs `env python3` once per essential package (mmtarfilter), and a
    # pyenv shim first on the PATH made each of those about ten times slower to start.
    environment = {**os.environ, "SOURCE_DATE_EPOCH": "0", "PATH": SYSTEM_PATH}
    logged(_mmdebstrap_command(rootfs, cache_dir), log, environment)
    prune_package_cache(installed_debs(rootfs), cache_dir / APT_ARCHIVES)
    install_node(rootfs, node)
    install_npm(rootfs, npm)
    _finish_rootfs(rootfs)


def _node_binary() -> Path:
    binary = pinned_node()
    if binary is None:
        raise ImageUnresolved(
            "The pinned node is not installed: run `make setup` "
            "(pip install --require-hashes -r layers/node/requirements.txt)."
        )
    return binary


def install_node(rootfs: Path, binary: Path) -> None:
    """The pinned node binary as /usr/bin/node (its built-in modules are compiled in)."""
    target = rootfs / "usr/bin/node"
    target.unlink(missing_ok=True)
    shutil.copyfile(binary, target)
    target.chmod(0o755)


def installed_debs(rootfs: Path) -> set[str]:
    """The file names apt gives the packages installed in `rootfs` (an epoch's ':' as %3a)."""
    names = set()
    for stanza in (rootfs / "var/lib/dpkg/status").read_text(encoding="utf-8").split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if {"Package", "Version", "Architecture"} <= fields.keys():
            version = fields["Version"].replace(":", "%3a")
            names.add(f"{fields['Package']}_{version}_{fields['Architecture']}.deb")
    return names


def prune_package_cache(keep: set[str], archives: Path) -> None:
    """Drop the cached packages this build did not install: older versions and packages the
    recipe no longer has. The cache is then the size of one image's packages, and every
    build's sync in and out copies only those."""
    for deb in archives.glob("*.deb"):
        if deb.name not in keep:
            deb.unlink(missing_ok=True)


def _mmdebstrap_command(rootfs: Path, cache_dir: Path) -> list[str]:
    """The host's suite and apt sources, the packages in one apt run, dpkg without fsync (the
    rootfs is scratch until it is archived) or documentation, and the user's package cache
    and package lists synced in and out, so apt downloads only what changed."""
    archives, lists = cache_dir / APT_ARCHIVES, cache_dir / APT_LISTS
    for directory in (archives, lists):
        directory.mkdir(parents=True, exist_ok=True)
    return [
        "mmdebstrap", *_ROOTFS_FLAGS, f"--include={','.join(DEFAULT_PACKAGES)}",
        '--setup-hook=mkdir -p "$1"/var/cache/apt/archives "$1"/var/lib/apt/lists',
        f"--setup-hook=sync-in {archives} /var/cache/apt/archives/",
        f"--setup-hook=sync-in {lists} /var/lib/apt/lists/",
        f"--customize-hook=sync-out /var/cache/apt/archives {archives}",
        f"--customize-hook=sync-out /var/lib/apt/lists {lists}",
        host_suite(), str(rootfs),
        *([str(HOST_DEBIAN_SOURCES)] if HOST_DEBIAN_SOURCES.is_file() else []),
    ]  # fmt: skip


def _stages(progress: Progress, log: TextIO, total: int) -> Progress:
    """One progress line per stage, also written into the log between the stages' output."""
    count = iter(range(1, total + 1))

    def stage(what: str) -> None:
        line = f"[{next(count)}/{total}] {what}"
        progress(line)
        log.write(f"\n=== {line}\n")
        log.flush()

    return stage


@contextmanager
def build_log(cache_dir: Path, name: str) -> Iterator[TextIO]:
    """The full output of a build, kept in a file; a failure names the file."""
    logs = cache_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = logs / f"{name}-{stamp}-{os.getpid()}.log"
    with path.open("w", encoding="utf-8") as log:
        try:
            yield log
        except ContainerError as error:
            log.write(f"\n=== failed: {getattr(error, 'detail', error)}\n")
            raise ImageUnresolved(f"{error} The full build log is {path}.") from error


def logged(command: list[str], log: TextIO, env: dict[str, str] | None = None) -> None:
    """Run a build step with its output into the log; fail naming the step."""
    log.flush()
    completed = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    if completed.returncode != 0:
        raise ImageUnresolved(
            f"Image build step failed: {command[0]} exited {completed.returncode}."
        )


def _reproducible_tar(rootfs: Path, tarball: Path, log: TextIO) -> None:
    """Drop what records when and where the build ran; archive sorted, with fixed times."""
    for relative in _UNREPRODUCIBLE:
        target = rootfs / relative
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
            target.mkdir()
        elif target.exists() or target.is_symlink():
            target.unlink()
            target.touch()
    logged(["tar", "--sort=name", "--mtime=@0", "--clamp-mtime", "--numeric-owner",
            "--format=gnu", "-C", str(rootfs), "-cf", str(tarball), "."], log)  # fmt: skip


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


def _finish_rootfs(rootfs: Path) -> None:
    """Drop the build's own apt and dpkg settings (no fsync has no place in a check), add the
    check user and its /workspace."""
    for settings in _BUILD_SETTINGS:
        (rootfs / settings).unlink(missing_ok=True)
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
