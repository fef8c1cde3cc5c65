"""The local PromoteJournal: a table in the Store's SQLite file, one row per completed step."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from forkhorse.ports.journal import ENDED, STARTED

_SCHEMA = """
CREATE TABLE IF NOT EXISTS promote_journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, promotion_id TEXT NOT NULL, step TEXT NOT NULL,
    output TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS promote_journal_by_promotion ON promote_journal (promotion_id, seq);
"""


class SqlitePromoteJournal:
    """Autocommit writes: each record is durable once `record` returns (WAL survives a kill)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._lock = threading.Lock()
        with self._lock:
            self._conn.executescript(_SCHEMA)

    def start(self, promotion_id: str, state: dict[str, Any], at: datetime) -> bool:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                seen = self._conn.execute(
                    "SELECT 1 FROM promote_journal WHERE promotion_id = ?", (promotion_id,)
                ).fetchone()
                if seen is None:
                    self._insert(promotion_id, STARTED, state, at)
            finally:
                self._conn.execute("COMMIT")
        return seen is None

    def record(self, promotion_id: str, step: str, output: dict[str, Any], at: datetime) -> None:
        with self._lock:
            self._insert(promotion_id, step, output, at)

    def _insert(self, promotion_id: str, step: str, output: dict[str, Any], at: datetime) -> None:
        self._conn.execute(
            "INSERT INTO promote_journal (promotion_id, step, output, at) VALUES (?, ?, ?, ?)",
            (promotion_id, step, json.dumps(output), at.isoformat()),
        )

    def last(self, promotion_id: str) -> tuple[str, dict[str, Any]] | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT step, output FROM promote_journal WHERE promotion_id = ? "
                "ORDER BY seq DESC LIMIT 1",
                (promotion_id,),
            ).fetchone()
        return None if row is None else (row[0], json.loads(row[1]))

    def unfinished(self) -> list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT promotion_id FROM promote_journal GROUP BY promotion_id "
                "HAVING SUM(step = ?) = 0 ORDER BY MIN(seq)",
                (ENDED,),
            ).fetchall()
        return [row[0] for row in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
