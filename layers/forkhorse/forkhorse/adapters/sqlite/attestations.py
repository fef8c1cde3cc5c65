"""Attestations in local mode: two tables in the Store's SQLite database file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from forkhorse.ports.attestations import RegisteredKey

_SCHEMA = """
CREATE TABLE IF NOT EXISTS attestations (
    subject TEXT PRIMARY KEY,
    envelope TEXT NOT NULL,
    written_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS signing_keys (
    keyid TEXT PRIMARY KEY,
    public_key TEXT NOT NULL,
    since TEXT NOT NULL
);
"""
_BUSY_TIMEOUT_SECONDS = 30.0


class SqliteAttestations:
    """Put-if-absent rows over one connection, serialised per process (calls are rare: one
    per attach, promotion or read)."""

    def __init__(self, database: Path) -> None:
        self._conn = sqlite3.connect(
            database, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA synchronous=NORMAL")  # as the Store's: WAL keeps it durable
        self._lock = threading.Lock()
        with self._connection() as conn:
            conn.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._conn

    def put_envelope(self, subject: str, envelope: str, now: datetime) -> bool:
        with self._connection() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO attestations (subject, envelope, written_at)"
                " VALUES (?, ?, ?)",
                (subject, envelope, now.isoformat()),
            )
            return cursor.rowcount == 1

    def get_envelope(self, subject: str) -> str | None:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT envelope FROM attestations WHERE subject = ?", (subject,)
            ).fetchone()
        return None if row is None else str(row[0])

    def register_key(self, keyid: str, public_key: str, now: datetime) -> bool:
        with self._connection() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO signing_keys (keyid, public_key, since) VALUES (?, ?, ?)",
                (keyid, public_key, now.isoformat()),
            )
            return cursor.rowcount == 1

    def list_keys(self) -> list[RegisteredKey]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT keyid, public_key, since FROM signing_keys ORDER BY since, rowid"
            ).fetchall()
        return [RegisteredKey(row[0], row[1], datetime.fromisoformat(row[2])) for row in rows]
