"""An in-memory snapshot for harness unit tests (integration tests use real git)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from forkhorse.domain.snapshot import (
    BINARY_SAMPLE_BYTES,
    FileStat,
    MalformedText,
    SnapshotBudget,
    validate_path,
    validate_prefix,
)


class MemoryReader:
    def __init__(
        self, files: dict[str, bytes], budget: SnapshotBudget, on_read: Callable[[str], None] | None
    ) -> None:
        self._files = files
        self._budget = budget
        self._on_read = on_read
        self.commit = "0" * 40

    def read(self, path: str) -> str | None:
        validate_path(path)
        self._budget.reserve_operations(1)
        data = self._files.get(path)
        if data is None:
            return None
        self._budget.reserve_bytes(len(data))
        if self._on_read is not None:
            self._on_read(path)
        self._budget.ensure_live()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise MalformedText() from error

    def stat(self, path: str) -> FileStat | None:
        validate_path(path)
        self._budget.reserve_operations(1)
        data = self._files.get(path)
        if data is None:
            return None
        sample = data[:BINARY_SAMPLE_BYTES]
        self._budget.reserve_bytes(len(sample))
        return {"size": len(data), "binary": b"\0" in sample}

    def list(self, prefix: str) -> list[str]:
        validate_prefix(prefix)
        self._budget.reserve_operations(1)
        paths = sorted(path for path in self._files if path.startswith(prefix))
        self._budget.reserve_listed_paths(len(paths))
        return paths


class MemorySnapshot:
    def __init__(
        self, files: dict[str, bytes | str], on_read: Callable[[str], None] | None = None
    ) -> None:
        self._files = {p: d.encode() if isinstance(d, str) else d for p, d in files.items()}
        self._on_read = on_read
        self.commit = "0" * 40
        self.tree = "1" * 40
        self.budgets: list[SnapshotBudget] = []

    def reader(self, budget: SnapshotBudget) -> MemoryReader:
        self.budgets.append(budget)
        return MemoryReader(self._files, budget, self._on_read)

    def export_to(self, dest_dir: Path, deadline: float | None = None) -> None:
        for path, data in self._files.items():
            (dest_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (dest_dir / path).write_bytes(data)

    def export_tar(self, dest: IO[bytes], deadline: float | None = None) -> None:
        with tarfile.open(fileobj=dest, mode="w") as archive:
            for path, data in sorted(self._files.items()):
                info = tarfile.TarInfo(path)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
