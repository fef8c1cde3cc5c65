"""The Python runtime a quick-check child runs: the interpreter, its stdlib and shared libraries.

Only these paths are bound into the bubblewrap sandbox. The base installation's
site-packages is hidden, so only the standard library is importable.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

_LDD_PATH = re.compile(r"(?:=>\s+|^\s+)(/\S+)\s+\(0x", re.MULTILINE)
_FALLBACK_LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
HIDDEN_TMPFS_BYTES = 4096  # an empty, read-only tmpfs over site-packages: one page


@dataclass(frozen=True)
class PythonRuntime:
    executable: str
    stdlib: str
    hidden: tuple[str, ...]
    libraries: tuple[str, ...]
    library_dirs: tuple[str, ...]

    def bind_arguments(self) -> list[str]:
        """bubblewrap arguments that make exactly this runtime visible, read-only."""
        arguments = self._parent_directories()
        arguments += ["--ro-bind", os.path.realpath(self.executable), self.executable]
        arguments += ["--ro-bind", self.stdlib, self.stdlib]
        for library in self.libraries:
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
        bound = (self.executable, self.stdlib, *self.libraries, *self.library_dirs)
        parents = {str(parent) for path in bound for parent in PurePosixPath(path).parents}
        parents.discard("/")
        arguments = []
        for directory in sorted(parents, key=lambda path: (path.count("/"), path)):
            arguments += ["--perms", "0755", "--dir", directory]
        return arguments


@functools.cache
def current_runtime() -> PythonRuntime:
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
    objects = [executable, *sorted(str(path) for path in dynload.glob("*.so"))]
    libraries = _shared_libraries(objects)
    library_dirs = () if libraries else tuple(d for d in _FALLBACK_LIBRARY_DIRS if os.path.isdir(d))
    return PythonRuntime(executable, stdlib, tuple(sorted(hidden)), libraries, library_dirs)


def _shared_libraries(objects: list[str]) -> tuple[str, ...]:
    """Every shared library the interpreter and its extension modules load, via ldd."""
    try:
        listing = subprocess.run(
            ["ldd", *objects], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(sorted(set(_LDD_PATH.findall(listing))))
