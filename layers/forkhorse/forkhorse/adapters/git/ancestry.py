"""The ancestry memo that outlives restarts: a SQLite file in the home, one row per commit
read and per answer (`forkhorse.service.ancestry` asks it)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from forkhorse.domain.limits import GIT_WALKS
from forkhorse.ports.ancestry import MemoSession, Node

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS commits (project TEXT NOT NULL, sha BLOB NOT NULL,"
    " generation INTEGER NOT NULL, parents BLOB NOT NULL, PRIMARY KEY (project, sha))"
    " WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS answers (project TEXT NOT NULL, ancestor BLOB NOT NULL,"
    " descendant BLOB NOT NULL, answer INTEGER NOT NULL,"
    " PRIMARY KEY (project, ancestor, descendant)) WITHOUT ROWID",
    # Rows written per project since its memo was last cleared (an upper bound: a row
    # written again counts twice), so the bound is kept without counting the tables.
    "CREATE TABLE IF NOT EXISTS sizes (project TEXT PRIMARY KEY, written INTEGER NOT NULL)",
)


class SqliteAncestryMemo:
    """A SQLite file (mode 0600) that outlives restarts: a commit is read once per project
    while its rows are kept. Ids are stored as 20 bytes, parents concatenated, so a commit's
    row is about 60 bytes. A project's rows are cleared once it has written `rows` of them
    (commits an agent pushed and gc removed would otherwise stay for good); the next
    questions read again, each within its own bound. Each question opens its own
    connection."""

    def __init__(self, path: Path, rows: int = GIT_WALKS.memo_rows_per_project) -> None:
        self._path = path
        self._rows = rows
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(descriptor)
        path.chmod(0o600)
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                connection.execute(statement)
        connection.close()

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=30.0, isolation_level=None)

    @contextmanager
    def session(self, project: str) -> Iterator[MemoSession]:
        connection = self._connect()
        try:
            yield _SqliteSession(connection, project, self._rows)
        finally:
            connection.close()


class _SqliteSession:
    def __init__(self, connection: sqlite3.Connection, project: str, rows: int) -> None:
        self._db = connection
        self._project = project
        self._rows = rows

    def node(self, sha: str) -> Node | None:
        row = self._db.execute(
            "SELECT generation, parents FROM commits WHERE project = ? AND sha = ?",
            (self._project, bytes.fromhex(sha)),
        ).fetchone()
        if row is None:
            return None
        parents: bytes = row[1]
        return int(row[0]), tuple(parents[i : i + 20].hex() for i in range(0, len(parents), 20))

    def answer(self, ancestor: str, descendant: str) -> bool | None:
        row = self._db.execute(
            "SELECT answer FROM answers WHERE project = ? AND ancestor = ? AND descendant = ?",
            (self._project, bytes.fromhex(ancestor), bytes.fromhex(descendant)),
        ).fetchone()
        return None if row is None else bool(row[0])

    def remember(self, nodes: Mapping[str, Node], answers: Mapping[tuple[str, str], bool]) -> None:
        if not nodes and not answers:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._keep_bound(len(nodes) + len(answers))
            self._db.executemany(
                "INSERT INTO commits VALUES (?, ?, ?, ?) ON CONFLICT (project, sha)"
                " DO UPDATE SET generation = excluded.generation"
                " WHERE excluded.generation > commits.generation",
                (
                    (
                        self._project,
                        bytes.fromhex(sha),
                        generation,
                        b"".join(bytes.fromhex(parent) for parent in parents),
                    )
                    for sha, (generation, parents) in nodes.items()
                ),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)",
                (
                    (self._project, bytes.fromhex(a), bytes.fromhex(d), int(answer))
                    for (a, d), answer in answers.items()
                ),
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _keep_bound(self, adding: int) -> None:
        """Clear the project's rows if adding these would pass the bound (inside the
        caller's transaction)."""
        row = self._db.execute(
            "SELECT written FROM sizes WHERE project = ?", (self._project,)
        ).fetchone()
        written = (0 if row is None else int(row[0])) + adding
        if written > self._rows:
            self._db.execute("DELETE FROM commits WHERE project = ?", (self._project,))
            self._db.execute("DELETE FROM answers WHERE project = ?", (self._project,))
            written = adding
        self._db.execute("INSERT OR REPLACE INTO sizes VALUES (?, ?)", (self._project, written))
