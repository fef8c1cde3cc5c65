"""Snapshot capability rules: path validation, per-check budgets and the error vocabulary.

Pure: no I/O. The snapshot reader adapter enforces these rules for `ctx.read`, `ctx.stat`
and `ctx.list`; the quick-check runner owns one `SnapshotBudget` per check. A full check's
export of the same snapshot is bounded by one `ExportBudget`. Both charge what is walked:
a subtree reached twice is charged twice, so repeated subtrees (a tree bomb) cost what
they expand to.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import ClassVar, TypedDict

from forkhorse.domain.limits import EXPORT, SNAPSHOT, ExportLimits

MAX_PATH_LEVELS = SNAPSHOT.path_levels
BINARY_SAMPLE_BYTES = 8 * 1024
DEFAULT_MAX_BYTES = SNAPSHOT.read_bytes
DEFAULT_MAX_LISTED_PATHS = SNAPSHOT.listed_paths
DEFAULT_MAX_OPERATIONS = SNAPSHOT.operations

# C0 controls and DEL, plus the C1 range that terminals also interpret.
_CONTROL_CODEPOINTS = frozenset([*range(0x00, 0x20), *range(0x7F, 0xA0)])


class SnapshotError(Exception):
    """Base of every snapshot failure. Its text is a static, safe sentence."""

    default_message: ClassVar[str] = "The snapshot request failed."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)

    @property
    def message(self) -> str:
        return str(self)


class PathRejected(SnapshotError):
    default_message = "The path is not a safe repository-relative path."


class BudgetExceeded(SnapshotError):
    default_message = "The check exceeded its snapshot budget."


class ExportLimitExceeded(SnapshotError):
    """The checkout is larger than a full check may export: the check fails."""

    default_message = "The checkout exceeds the export limits."


class ExportTimedOut(SnapshotError):
    """The export outlasted the check's own timeout: the check is timed-out."""

    default_message = "The checkout could not be exported within the check's timeout."


class SnapshotUnavailable(SnapshotError):
    """A provider object is missing or the tree is unsafe: fail closed."""

    default_message = "The snapshot is unavailable or unsafe."


class CapabilityRevoked(SnapshotError):
    default_message = "The snapshot capability was revoked."


class MalformedText(SnapshotError):
    """`read` found bytes that are not valid UTF-8: an error, never text."""

    default_message = "The file is not valid UTF-8 text."


class FileStat(TypedDict):
    size: int
    binary: bool


def validate_path(path: object) -> tuple[str, ...]:
    """Return the components of a safe repository-relative file path, or raise PathRejected.

    Rejects non-strings, absolute paths, empty components (including a trailing slash),
    `.` and `..`, backslashes, control characters, `.git` components in any letter case
    and more than 64 levels.
    """
    if not isinstance(path, str) or path == "":
        raise PathRejected("The path must be a non-empty string.")
    if path.startswith("/"):
        raise PathRejected("Absolute paths are not allowed.")
    if "\\" in path:
        raise PathRejected("Backslashes are not allowed in paths.")
    if any(ord(char) in _CONTROL_CODEPOINTS for char in path):
        raise PathRejected("Control characters are not allowed in paths.")
    components = tuple(path.split("/"))
    for component in components:
        _check_component(component)
    if len(components) > MAX_PATH_LEVELS:
        raise PathRejected(f"Paths are limited to {MAX_PATH_LEVELS} levels.")
    return components


def validate_prefix(prefix: object) -> str:
    """Validate a literal `list` prefix: `""`, a directory ending in `/`, or a partial path."""
    if not isinstance(prefix, str):
        raise PathRejected("The prefix must be a string.")
    if prefix == "":
        return prefix
    validate_path(prefix.removesuffix("/"))
    return prefix


def is_safe_entry_name(name: str) -> bool:
    """Whether one tree entry name is acceptable inside a snapshot (else the tree is unsafe)."""
    try:
        _check_component(name)
    except PathRejected:
        return False
    return "/" not in name and "\\" not in name and not _has_control(name)


def _has_control(text: str) -> bool:
    return any(ord(char) in _CONTROL_CODEPOINTS for char in text)


def _check_component(component: str) -> None:
    if component == "":
        raise PathRejected("Empty path components are not allowed.")
    if component in (".", ".."):
        raise PathRejected("Path traversal is not allowed.")
    if component.lower() == ".git":
        raise PathRejected("Paths may not contain .git components.")


class SnapshotBudget:
    """Per-check budget, reserved before any blob is materialized; safe across threads.

    Reservations are all-or-nothing: a call that would go past a limit reserves nothing,
    raises BudgetExceeded and delivers no data. `revoke()` makes every later call, and
    every pending call at its next checkpoint, raise CapabilityRevoked.
    """

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_listed_paths: int = DEFAULT_MAX_LISTED_PATHS,
        max_operations: int = DEFAULT_MAX_OPERATIONS,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_listed_paths = max_listed_paths
        self.max_operations = max_operations
        self._bytes = 0
        self._listed_paths = 0
        self._operations = 0
        self._revoked = False
        self._lock = threading.Lock()

    @property
    def used_bytes(self) -> int:
        return self._bytes

    @property
    def used_listed_paths(self) -> int:
        return self._listed_paths

    @property
    def used_operations(self) -> int:
        return self._operations

    @property
    def revoked(self) -> bool:
        return self._revoked

    def revoke(self) -> None:
        with self._lock:
            self._revoked = True

    def ensure_live(self) -> None:
        """Checkpoint: raise CapabilityRevoked once the capability is revoked."""
        if self._revoked:
            raise CapabilityRevoked()

    def reserve_bytes(self, count: int) -> None:
        """Reserve bytes of reads and stat samples (the module source included)."""
        with self._lock:
            self._reserve_locked(count)
            if self._bytes + count > self.max_bytes:
                raise BudgetExceeded(
                    f"The check exceeded its snapshot budget of {self.max_bytes} bytes."
                )
            self._bytes += count

    def reserve_listed_paths(self, count: int) -> None:
        """Reserve listed paths; repeated listings count again."""
        with self._lock:
            self._reserve_locked(count)
            self._check_listed_paths(count)
            self._listed_paths += count

    def ensure_listed_paths(self, count: int) -> None:
        """Raise as `reserve_listed_paths(count)` would, reserving nothing.

        A listing checks this for every path it finds, so a walk stops at the first path
        past the budget instead of building the whole list first.
        """
        with self._lock:
            self._reserve_locked(count)
            self._check_listed_paths(count)

    def _check_listed_paths(self, count: int) -> None:
        if self._listed_paths + count > self.max_listed_paths:
            raise BudgetExceeded(
                f"The check exceeded its budget of {self.max_listed_paths} listed paths."
            )

    def reserve_operations(self, count: int) -> None:
        """Reserve fetched tree entries and file calls (one shared counter)."""
        with self._lock:
            self._reserve_locked(count)
            if self._operations + count > self.max_operations:
                raise BudgetExceeded(
                    "The check exceeded its budget of "
                    f"{self.max_operations} tree entries and file calls."
                )
            self._operations += count

    def _reserve_locked(self, count: int) -> None:
        if self._revoked:
            raise CapabilityRevoked()
        if count < 0:
            raise ValueError("A reservation cannot be negative.")


class ExportBudget:
    """One full check's export: every path written is charged, repeated subtrees included.

    `deadline` is a `clock()` reading (monotonic seconds) after which the export stops;
    it is checked before every entry, so an export never outlasts the check's timeout by
    more than one entry.
    """

    def __init__(
        self,
        limits: ExportLimits = EXPORT,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.deadline = deadline
        self._clock = clock
        self.paths = 0
        self.bytes = 0

    def charge_path(self, level: int) -> None:
        """Charge one entry `level` levels deep (1 for the root's entries)."""
        if self.deadline is not None and self._clock() >= self.deadline:
            raise ExportTimedOut()
        if level > self.limits.path_levels:
            raise ExportLimitExceeded(
                f"The checkout exceeds the export limit of {self.limits.path_levels} levels."
            )
        if self.paths + 1 > self.limits.paths:
            raise ExportLimitExceeded(
                f"The checkout exceeds the export limit of {self.limits.paths:,} paths."
            )
        self.paths += 1

    def charge_bytes(self, count: int) -> None:
        """Charge file or link content before it is materialized."""
        if self.bytes + count > self.limits.bytes:
            raise ExportLimitExceeded(
                f"The checkout exceeds the export limit of {self.limits.bytes:,} bytes."
            )
        self.bytes += count
