"""The local Lambda base image that `sam local` asks for, built here instead of pulled.

SAM's python3.13/x86_64 runtime image is `public.ecr.aws/lambda/python:3.13-x86_64`
(`Runtime.get_image_name_tag` in samcli/local/docker/lambda_image.py). This builds an image
with that tag from what the machine has: a debootstrap minbase rootfs of the host's Debian
release, the host's Python 3.13 tree (pyenv's build, same glibc) at /var/lang, awslambdaric
and boto3 in /var/runtime from PyPI wheels, and the /var/runtime/bootstrap and
/lambda-entrypoint.sh conventions of AWS's images. SAM adds its bundled aws-lambda-rie on top.

A label records a key over every input, so a later run with the same inputs reuses the image.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from forkhorse.adapters.containers.images import host_suite, scratch_dir, stream
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman, PodmanFailed
from forkhorse.ports.containers import ImageUnresolved

IMAGE_TAG = "public.ecr.aws/lambda/python:3.13-x86_64"
KEY_LABEL = "org.forkhorse.sam-local-base"
HERE = Path(__file__).resolve().parent
# Shared libraries that Python's extension modules link against (ssl, ctypes, sqlite3, ...),
# and CA certificates as AWS's image has them.
RUNTIME_PACKAGES = (
    "libssl3", "libffi8", "libsqlite3-0", "libexpat1", "libreadline8", "libncursesw6",
    "libuuid1", "libbz2-1.0", "liblzma5", "zlib1g", "ca-certificates",
)  # fmt: skip
INPUT_FILES = ("bootstrap", "lambda-entrypoint.sh", "runtime-requirements.txt", "base_image.py")
# Python's tests, IDLE, Tk and static archives: not in a Lambda runtime, 150 MB here.
PYTHON_EXCLUDES = (
    "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "__phello__", "*.a",
    "config-3.13-x86_64-linux-gnu", "include", "share", "pkgconfig",
)  # fmt: skip
ENVIRONMENT = (
    "PATH=/var/lang/bin:/usr/local/bin:/usr/bin:/bin:/opt/bin",
    "LD_LIBRARY_PATH=/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib"
    ":/var/task:/var/task/lib:/opt/lib",
    "LAMBDA_TASK_ROOT=/var/task",
    "LAMBDA_RUNTIME_DIR=/var/runtime",
    "LANG=en_US.UTF-8",
    "TZ=:UTC",
)


def python_home() -> Path:
    """The host's Python 3.13 installation (the one this script runs on, venv or not)."""
    home = Path(sys.base_prefix)
    if sys.version_info[:2] != (3, 13) or home == Path("/usr"):
        raise SystemExit(
            f"Need a self-contained Python 3.13 (pyenv install 3.13) to copy to /var/lang; "
            f"this is {sys.version.split()[0]} at {home}."
        )
    return home


def cache_key(home: Path) -> str:
    digest = hashlib.sha256()
    for name in INPUT_FILES:
        digest.update((HERE / name).read_bytes())
    digest.update(f"{home}:{sys.version}:{' '.join(RUNTIME_PACKAGES)}".encode())
    return digest.hexdigest()[:32]


def current_key(podman: Podman) -> str | None:
    completed = podman.run(
        "image", "inspect", "--format", f'{{{{index .Labels "{KEY_LABEL}"}}}}', IMAGE_TAG
    )
    return completed.stdout.decode().strip() if completed.returncode == 0 else None


def ensure_base_image(podman: Podman, cache_dir: Path) -> bool:
    """Build the image unless one with the same inputs exists; True when it was built."""
    home = python_home()
    key = cache_key(home)
    if current_key(podman) == key:
        print(f"sam-local: {IMAGE_TAG} is current ({key[:12]})", flush=True)
        return False
    started = time.monotonic()
    build(podman, home, key, cache_dir)
    print(f"sam-local: built {IMAGE_TAG} in {time.monotonic() - started:.0f} s", flush=True)
    return True


def build(podman: Podman, home: Path, key: str, cache_dir: Path) -> None:
    debs = cache_dir / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    with scratch_dir(cache_dir) as scratch:
        rootfs = scratch / "rootfs"
        _progress("[1/4] debootstrap minbase with Python's shared libraries")
        _step(["debootstrap", "--variant=minbase", f"--include={','.join(RUNTIME_PACKAGES)}",
               f"--cache-dir={debs}", host_suite(), str(rootfs)])  # fmt: skip
        _progress(
            f"[2/4] Python {sys.version.split()[0]} at /var/lang, the runtime in /var/runtime"
        )
        _install_python(home, rootfs / "var/lang")
        _install_runtime(rootfs)
        _progress("[3/4] podman import")
        tarball = scratch / "rootfs.tar"
        _step(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."])
        changes = [
            *(f"ENV {variable}" for variable in ENVIRONMENT),
            "WORKDIR /var/task",
            'ENTRYPOINT ["/lambda-entrypoint.sh"]',
            f"LABEL {KEY_LABEL}={key}",
        ]
        flags = [flag for change in changes for flag in ("--change", change)]
        completed = podman.run("import", *flags, str(tarball), IMAGE_TAG, timeout=600)
        if completed.returncode != 0:
            raise PodmanFailed(("import", IMAGE_TAG), completed.stderr)
    _progress("[4/4] checking the image")
    print(smoke_test(podman), flush=True)


def _install_python(home: Path, target: Path) -> None:
    shutil.copytree(home, target, symlinks=True, ignore=_python_ignore(home))


def _python_ignore(home: Path) -> Callable[[str, list[str]], set[str]]:
    site_packages = home / "lib/python3.13/site-packages"
    excluded = shutil.ignore_patterns(*PYTHON_EXCLUDES)

    def ignore(directory: str, names: list[str]) -> set[str]:
        if Path(directory) == site_packages:  # the host's own packages stay on the host
            return set(names)
        return set(excluded(directory, names))

    return ignore


def _install_runtime(rootfs: Path) -> None:
    runtime = rootfs / "var/runtime"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-qq", "--disable-pip-version-check",
         "--target", str(runtime), "--only-binary=:all:", "--implementation", "cp",
         "--python-version", "3.13", "--platform", "manylinux2014_x86_64",
         "--platform", "manylinux_2_28_x86_64", "-r", str(HERE / "runtime-requirements.txt")],
        check=True,
    )  # fmt: skip
    shutil.copy(HERE / "bootstrap", runtime / "bootstrap")
    shutil.copy(HERE / "lambda-entrypoint.sh", rootfs / "lambda-entrypoint.sh")
    (rootfs / "var/task").mkdir(exist_ok=True)
    (rootfs / "opt").mkdir(exist_ok=True)


def smoke_test(podman: Podman) -> str:
    """The image's Python imports its runtime and every shared-library-backed module."""
    probe = (
        "import awslambdaric, boto3, ssl, sqlite3, ctypes, hashlib, lzma, bz2, zlib, uuid; "
        "import sys; print(sys.version.split()[0], 'awslambdaric', "
        "__import__('importlib.metadata').metadata.version('awslambdaric'), "
        "'boto3', boto3.__version__)"
    )
    return podman.output(
        "run", "--rm", "--pull", "never", "--network", "none", *ULIMIT_FLAGS,
        "--entrypoint", "/var/lang/bin/python3.13", "-e", "PYTHONPATH=/var/runtime",
        IMAGE_TAG, "-c", probe,
    ).strip()  # fmt: skip


def image_size(podman: Podman) -> str:
    return podman.output("image", "inspect", "--format", "{{.Size}}", IMAGE_TAG).strip()


def _progress(message: str) -> None:
    print(f"sam-local: {message}", flush=True)


def _step(command: list[str]) -> None:
    """Run a build step quietly; its last lines are shown when it fails."""
    tail: deque[str] = deque(maxlen=40)
    try:
        stream(command, tail.append)
    except ImageUnresolved:
        print("\n".join(tail), file=sys.stderr, flush=True)
        raise


if __name__ == "__main__":
    cache = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".aws-sam/sam-local")
    engine = Podman()
    ensure_base_image(engine, cache.resolve())
    print(f"sam-local: {IMAGE_TAG} is {int(image_size(engine)) / 1e6:.0f} MB")
