"""The runtimes a quick-check child runs: an executable, its own files and shared libraries.

Only these paths are bound into the bubblewrap sandbox. For Python that is the interpreter and
its standard library (the base installation's site-packages is hidden) and the libraries of its
extension modules, except those that need a display or a terminal; for JavaScript it is the
`node` binary alone (its built-in modules are compiled in).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from forkhorse.adapters.node_release import pinned_node
from forkhorse.adapters.sandbox.library_stage import stage_libraries

_LDD_PATH = re.compile(r"(?:=>\s+|^\s+)(/\S+)\s+\(0x", re.MULTILINE)
_FALLBACK_LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
HIDDEN_TMPFS_BYTES = 4096  # an empty, read-only tmpfs over site-packages: one page
# The usual places, and /opt/bin: where NodeRuntimeLayer puts it in QuickCheckJsFunction.
_NODE_CANDIDATES = ("/usr/bin/node", "/usr/local/bin/node", "/opt/bin/node")
# node appears here in the sandbox, wherever it is installed: the pinned one lives in the
# virtualenv, which may sit under /tmp, where the sandbox's own /tmp would hide it.
NODE_INSIDE = "/opt/forkhorse/bin/node"
_NODE_VERSION = re.compile(r"v(\d+)\.(\d+)\.(\d+)")
# vm.SourceTextModule (--experimental-vm-modules) and the vm context options the harness uses.
MIN_NODE_MAJOR = 18
# Extension modules that cannot work in a sandbox without a display, a terminal or /dev. Their
# libraries (X11, Tk, ncurses, readline: about twenty) are not bound: each bind costs every
# check about 70 µs of bubblewrap set-up, and each is host code a check does not need.
HEADLESS_UNUSABLE = ("_tkinter", "_curses", "_curses_panel", "readline")


class NodeMissing(RuntimeError):
    """JavaScript quick checks need Node.js; the message says what was found."""


@dataclass(frozen=True)
class SandboxRuntime:
    executable: str
    stdlib: str  # a directory tree the runtime reads ("" when it has none)
    hidden: tuple[str, ...]
    libraries: tuple[str, ...]
    library_dirs: tuple[str, ...]
    version: tuple[int, int, int] = (0, 0, 0)
    # Where the executable appears in the sandbox, when not at its own path.
    inside: str = ""

    @property
    def sandbox_executable(self) -> str:
        return self.inside or self.executable

    def bind_arguments(self) -> list[str]:
        """bubblewrap arguments that make exactly this runtime visible, read-only."""
        arguments = self._parent_directories()
        real = os.path.realpath(self.executable)
        arguments += ["--ro-bind", real, self.sandbox_executable]
        if self.stdlib:
            arguments += ["--ro-bind", self.stdlib, self.stdlib]
        stages = stage_libraries(self.libraries)  # each bound whole (library_stage.py)
        staged = {directory for directory, _ in stages}
        for directory, stage in stages:
            arguments += ["--ro-bind", stage, directory]
        for library in self.libraries:
            if os.path.dirname(library) not in staged:
                arguments += ["--ro-bind", os.path.realpath(library), library]
        for directory in self.library_dirs:
            arguments += ["--ro-bind", directory, directory]
        for directory in self.hidden:
            arguments += ["--size", str(HIDDEN_TMPFS_BYTES), "--tmpfs", directory]
            arguments += ["--remount-ro", directory]
        return arguments

    def _parent_directories(self) -> list[str]:
        """Every directory above a bound path, made traversable by the check's uid (bubblewrap
        would create them mode 0700, owned by the namespace's root)."""
        bound = (self.sandbox_executable, *self.libraries, *self.library_dirs)
        bound += (self.stdlib,) if self.stdlib else ()
        parents = {str(parent) for path in bound for parent in PurePosixPath(path).parents}
        parents.discard("/")
        arguments = []
        for directory in sorted(parents, key=lambda path: (path.count("/"), path)):
            arguments += ["--perms", "0755", "--dir", directory]
        return arguments


@functools.cache
def current_runtime() -> SandboxRuntime:
    """The interpreter running Forkhorse (its base installation, never a virtualenv)."""
    executable = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    stdlib = sysconfig.get_path("stdlib", vars={"installed_base": sys.base_prefix})
    hidden = tuple(
        path
        for path in {
            sysconfig.get_path("purelib", vars={"base": sys.base_prefix}),
            sysconfig.get_path("platlib", vars={"platbase": sys.base_prefix}),
        }
        if path.startswith(stdlib + os.sep) and os.path.isdir(path)
    )
    dynload = Path(stdlib) / "lib-dynload"
    extensions = (
        path for path in dynload.glob("*.so") if path.name.split(".")[0] not in HEADLESS_UNUSABLE
    )
    objects = [executable, *sorted(str(path) for path in extensions)]
    libraries = _shared_libraries(objects)
    return SandboxRuntime(
        executable, stdlib, tuple(sorted(hidden)), libraries, _library_dirs(libraries)
    )


@functools.cache
def node_runtime(executable: str | None = None) -> SandboxRuntime:
    """The pinned Node 24 (`node_release`, installed into the venv by `make setup`), else the
    `node` on PATH (or a usual place: Lambda's layer); checked to be at least MIN_NODE_MAJOR."""
    pinned = pinned_node()
    found = (
        executable
        or (str(pinned) if pinned is not None else None)
        or shutil.which("node")
        or next((path for path in _NODE_CANDIDATES if os.access(path, os.X_OK)), None)
    )
    if found is None:
        raise NodeMissing(
            f"Node.js is not installed; JavaScript quick checks need node {MIN_NODE_MAJOR} "
            "or later."
        )
    real = os.path.realpath(found)
    version = _node_version(real)
    if version[0] < MIN_NODE_MAJOR:
        shown = ".".join(map(str, version))
        raise NodeMissing(
            f"node {shown} is too old; JavaScript quick checks need node {MIN_NODE_MAJOR} or later."
        )
    libraries = _shared_libraries([real])
    return SandboxRuntime(
        real, "", (), libraries, _library_dirs(libraries), version, inside=NODE_INSIDE
    )


def _node_version(executable: str) -> tuple[int, int, int]:
    try:
        shown = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NodeMissing(f"{executable} does not run: {error}") from error
    match = _NODE_VERSION.match(shown.strip())
    if match is None:
        raise NodeMissing(f"{executable} reports no Node.js version.")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _library_dirs(libraries: tuple[str, ...]) -> tuple[str, ...]:
    """Whole library directories only when ldd named nothing (a static or unusual build)."""
    return () if libraries else tuple(d for d in _FALLBACK_LIBRARY_DIRS if os.path.isdir(d))


def _shared_libraries(objects: list[str]) -> tuple[str, ...]:
    """Every shared library the interpreter and its extension modules load, via ldd."""
    try:
        listing = subprocess.run(
            ["ldd", *objects], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(sorted(set(_LDD_PATH.findall(listing))))
