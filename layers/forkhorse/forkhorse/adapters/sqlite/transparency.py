"""The transparency log's ledger in local mode: tables in the Store's SQLite database file.

`log_entries` holds one row per index and `log_head` one row with the size and the newest
checkpoint; an append checks the size and the key and writes both under SQLite's write lock
(`BEGIN IMMEDIATE`), which is the conditional write on the tree size the port asks for.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from forkhorse.ports.transparency import Appended, Intent, LogHead

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log_entries (
    idx INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, entry BLOB NOT NULL,
    written_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_intents (
    key TEXT PRIMARY KEY, entry BLOB NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_head (
    one INTEGER PRIMARY KEY CHECK (one = 1), size INTEGER NOT NULL, published INTEGER NOT NULL,
    previous INTEGER NOT NULL, checkpoint TEXT, last_check TEXT);
INSERT OR IGNORE INTO log_head (one, size, published, previous) VALUES (1, 0, 0, 0);
"""
_BUSY_TIMEOUT_SECONDS = 30.0


class SqliteLogLedger:
    def __init__(self, database: Path) -> None:
        self._conn = sqlite3.connect(
            database, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.Lock()
        with self._transaction() as conn:
            conn.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _transaction(self, immediate: bool = False) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if not immediate:
                yield self._conn
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def head(self) -> LogHead:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT size, published, checkpoint, previous FROM log_head WHERE one = 1"
            ).fetchone()
        return LogHead(size=row[0], published=row[1], checkpoint=row[2], previous=row[3])

    def append(self, size: int, key: str, entry: bytes, now: datetime) -> Appended | None:
        with self._transaction(immediate=True) as conn:
            found = conn.execute("SELECT idx FROM log_entries WHERE key = ?", (key,)).fetchone()
            if found is not None:
                conn.execute("DELETE FROM log_intents WHERE key = ?", (key,))
                return Appended(found[0], new=False)
            updated = conn.execute(
                "UPDATE log_head SET size = size + 1 WHERE one = 1 AND size = ?", (size,)
            )
            if updated.rowcount != 1:
                return None
            conn.execute(
                "INSERT INTO log_entries (idx, key, entry, written_at) VALUES (?, ?, ?, ?)",
                (size, key, entry, now.isoformat()),
            )
            conn.execute("DELETE FROM log_intents WHERE key = ?", (key,))
        return Appended(size, new=True)

    def intend(self, key: str, entry: bytes, now: datetime) -> None:
        with self._transaction(immediate=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO log_intents (key, entry, at) VALUES (?, ?, ?)",
                (key, entry, now.isoformat()),
            )

    def intents(self, limit: int) -> list[Intent]:
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT key, entry, at FROM log_intents ORDER BY at, key LIMIT ?", (limit,)
            ).fetchall()
        return [Intent(row[0], bytes(row[1]), datetime.fromisoformat(row[2])) for row in rows]

    def drop_intent(self, key: str) -> None:
        with self._transaction(immediate=True) as conn:
            conn.execute("DELETE FROM log_intents WHERE key = ?", (key,))

    def index_of(self, key: str) -> int | None:
        with self._transaction() as conn:
            row = conn.execute("SELECT idx FROM log_entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    def entries(self, start: int, end: int) -> list[bytes]:
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT idx, entry FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
                (start, end),
            ).fetchall()
        found = []
        for expected, (index, entry) in enumerate(rows, start):
            if index != expected:
                break  # a gap: the entries stop where the ledger stops being whole
            found.append(bytes(entry))
        return found

    def publish(self, published: int, size: int, checkpoint: str) -> bool:
        with self._transaction(immediate=True) as conn:
            updated = conn.execute(
                "UPDATE log_head SET previous = published, published = ?, checkpoint = ?"
                " WHERE one = 1 AND published = ? AND (? > published OR checkpoint IS NULL)",
                (size, checkpoint, published, size),
            )
            return updated.rowcount == 1

    def record_check(self, report: str) -> None:
        with self._transaction(immediate=True) as conn:
            conn.execute("UPDATE log_head SET last_check = ? WHERE one = 1", (report,))

    def last_check(self) -> str | None:
        with self._transaction() as conn:
            row = conn.execute("SELECT last_check FROM log_head WHERE one = 1").fetchone()
        return None if row is None or row[0] is None else str(row[0])
