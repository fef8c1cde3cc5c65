"""The log's static files in local mode: a directory laid out as the URLs are
(`checkpoint`, `tile/<L>/<N>`, `tile/entries/<N>`), so it can be served or copied as is."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath


class DiskLogFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, path: str) -> Path:
        """Checked by its parts, not resolved: the log's own paths have no links to follow."""
        parts = PurePosixPath(path).parts
        if not parts or path.startswith("/") or any(p in ("..", ".") for p in parts):
            raise ValueError(f"not a path under the log: {path[:120]!r}")
        return self.root.joinpath(*parts)

    def read(self, path: str) -> bytes | None:
        try:
            return self._path(path).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write(self, path: str, data: bytes) -> None:
        """Whole or not at all: a reader never sees half a tile or checkpoint. Not synced,
        as the Store's SQLite (WAL, synchronous=NORMAL) is not: both survive a process
        crash, and what a power loss takes from the tiles the ledger rebuilds."""
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".writing-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def delete(self, path: str) -> None:
        self._path(path).unlink(missing_ok=True)
