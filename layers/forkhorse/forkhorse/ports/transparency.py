"""The transparency log's storage: the ledger of entries and the static files served from it.

The ledger (SQLite locally, the DynamoDB table on AWS) is the order of record: an entry is
appended only while the ledger holds exactly the size the appender read (a conditional
write on the tree size), so two appends never take one index, and only once per key, so a
retried step appends nothing twice. The files (a directory locally, S3 on AWS) are the
C2SP tiles and checkpoint derived from the ledger; they are immutable once written, and the
newest signed checkpoint is also kept in the ledger, where publishing it only moves forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class LogHead:
    size: int  # entries in the ledger
    published: int  # the tree size of the newest signed checkpoint
    checkpoint: str | None  # that checkpoint (a signed note); None before the first
    previous: int = 0  # the tree size published before it (its partial tiles are kept)


@dataclass(frozen=True)
class Intent:
    key: str
    entry: bytes
    at: datetime


@dataclass(frozen=True)
class Appended:
    index: int
    new: bool  # False: the key was logged already, at `index`


class LogLedger(Protocol):
    def head(self) -> LogHead: ...

    def append(self, size: int, key: str, entry: bytes, now: datetime) -> Appended | None:
        """Store `entry` at index `size` if the ledger holds exactly `size` entries and none
        with `key`; the entry with `key` if one is there; None if another append took
        index `size` first (read the head and try again). Either way the intent with `key`
        is gone after a success."""
        ...

    def intend(self, key: str, entry: bytes, now: datetime) -> None:
        """Note an entry about to be earned, before its object is written: a crash between
        the object and the append leaves the intent, which the repair settles."""
        ...

    def intents(self, limit: int) -> list[Intent]:
        """The oldest outstanding intents."""
        ...

    def drop_intent(self, key: str) -> None: ...

    def index_of(self, key: str) -> int | None: ...

    def entries(self, start: int, end: int) -> list[bytes]:
        """The entries at [start, end), in order (fewer if the ledger ends sooner)."""
        ...

    def publish(self, published: int, size: int, checkpoint: str) -> bool:
        """Record the checkpoint of `size` if the newest is still of `published`."""
        ...

    def record_check(self, report: str) -> None:
        """Keep the newest self-check's report (JSON) for the console."""
        ...

    def last_check(self) -> str | None: ...


class LogFiles(Protocol):
    """Static files under the log's prefix, by path (`checkpoint`, `tile/...`)."""

    def read(self, path: str) -> bytes | None: ...

    def write(self, path: str, data: bytes) -> None: ...

    def delete(self, path: str) -> None: ...


class LogPublisher(Protocol):
    """Asks the one holder of the key to sign and publish what the ledger holds: inline
    locally, the publisher function (invoked asynchronously) on AWS."""

    def request(self) -> None: ...
