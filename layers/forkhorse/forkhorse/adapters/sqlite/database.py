"""The local Store's database: one SQLite file in WAL mode under the state directory.

Each thread gets its own connection, closed when the thread ends (the local runner starts
a thread per run); every change runs in a `BEGIN IMMEDIATE` transaction, so SQLite
serializes writers and each compare-and-set in the aggregates' modules is checked and
applied under the same write lock.
"""

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel

DATABASE_NAME = "forkhorse.sqlite3"
_BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS principals (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS projects (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    project_id TEXT NOT NULL, agent_id TEXT NOT NULL, PRIMARY KEY (project_id, agent_id));
CREATE TABLE IF NOT EXISTS forks (
    project_id TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (project_id, id));
CREATE TABLE IF NOT EXISTS packets (
    project_id TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (project_id, id));
CREATE TABLE IF NOT EXISTS claims (packet_id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reviews (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, project_id TEXT NOT NULL,
    running INTEGER NOT NULL, data TEXT NOT NULL, latest INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS members_by_agent ON members (agent_id, project_id);
CREATE INDEX IF NOT EXISTS reviews_by_project ON reviews (project_id, seq);
CREATE INDEX IF NOT EXISTS reviews_running ON reviews (running);
CREATE TABLE IF NOT EXISTS promotions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, project_id TEXT NOT NULL, id TEXT NOT NULL,
    state TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (project_id, id));
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, project_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS promotions_by_review
    ON promotions (project_id, data ->> '$.review_id', seq);
CREATE INDEX IF NOT EXISTS ledger_by_project ON ledger (project_id, seq);
CREATE INDEX IF NOT EXISTS ledger_by_promotion ON ledger (project_id, data ->> '$.promotion_id');
CREATE INDEX IF NOT EXISTS ledger_by_review ON ledger (project_id, data ->> '$.review_id', seq);
CREATE INDEX IF NOT EXISTS ledger_by_commit ON ledger (project_id, data ->> '$.commit');
CREATE INDEX IF NOT EXISTS forks_by_agent ON forks (project_id, data ->> '$.owner_agent_id');
CREATE TABLE IF NOT EXISTS leases (
    project_id TEXT PRIMARY KEY, holder TEXT NOT NULL, token INTEGER NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS record_chunks (
    digest TEXT NOT NULL, idx INTEGER NOT NULL, chunk BLOB NOT NULL,
    written_at INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (digest, idx));
CREATE TABLE IF NOT EXISTS records (
    digest TEXT PRIMARY KEY, chunk_count INTEGER NOT NULL, written_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS review_receipts (
    review_id TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (review_id, digest));
"""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _add_written_at(conn: sqlite3.Connection) -> None:
    """Databases from before the collector lack `written_at`; their rows read as written
    at the epoch, so old orphans become collectable (referenced records are still kept)."""
    for table in ("record_chunks", "records"):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "written_at" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN written_at INTEGER NOT NULL DEFAULT 0")


def _rename_chunk_text(conn: sqlite3.Connection) -> None:
    """Chunks became bytes: databases from before name their chunk column `text`, which is
    `chunk` from now on. Its declared type stays TEXT there, which holds a BLOB as a BLOB and
    every row written before as the TEXT it was (SQLite keeps each value's own type)."""
    conn.execute("BEGIN IMMEDIATE")
    columns = {row[1] for row in conn.execute("PRAGMA table_info(record_chunks)")}
    if "text" in columns:
        conn.execute("ALTER TABLE record_chunks RENAME COLUMN text TO chunk")
    conn.execute("COMMIT")


def _add_latest(conn: sqlite3.Connection) -> None:
    """`latest` marks each fork and packet's newest review, the active ones `/state` shows.
    Databases from before it get the column and have it computed once from their history."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(reviews)")}
    if "latest" not in columns:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ALTER TABLE reviews ADD COLUMN latest INTEGER NOT NULL DEFAULT 0")
        conn.execute(
            "UPDATE reviews SET latest = 1 WHERE seq IN (SELECT MAX(seq) FROM reviews"
            " GROUP BY project_id, data ->> '$.fork_id', data ->> '$.packet_id')"
        )
        conn.execute("COMMIT")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS reviews_active ON reviews (project_id, seq) WHERE latest = 1"
    )


def to_micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def dump(model: BaseModel) -> str:
    return model.model_dump_json()


def _private_database(state_dir: Path) -> Path:
    """Only the owner may read the database (tokens' hashes, receipts): its directory is
    0700 and the file 0600 from creation; SQLite gives -wal and -shm the database's mode.
    Modes are reapplied at every start, for homes an older version created."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    state_dir.chmod(0o700)
    path = state_dir / DATABASE_NAME
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for name in (DATABASE_NAME, f"{DATABASE_NAME}-wal", f"{DATABASE_NAME}-shm"):
        with suppress(FileNotFoundError):
            (state_dir / name).chmod(0o600)
    return path


class _ThreadConnection:
    """Holds one thread's connection in its thread-local storage."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


class SqliteDatabase:
    """One thread-local connection per thread over the shared file; the aggregates'
    adapters build on its transactions."""

    def __init__(self, state_dir: Path) -> None:
        self.path = _private_database(state_dir)
        self._local = threading.local()
        self._connections: set[sqlite3.Connection] = set()
        self._connections_lock = threading.Lock()
        with closing(self._connect()) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            _add_written_at(conn)
            _rename_chunk_text(conn)
            _add_latest(conn)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=_BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _conn(self) -> sqlite3.Connection:
        held: _ThreadConnection | None = getattr(self._local, "held", None)
        if held is None:
            held = _ThreadConnection(self._connect())
            self._local.held = held
            with self._connections_lock:
                self._connections.add(held.conn)
            # A thread's locals go when it ends: its connection is closed with them.
            weakref.finalize(held, self._release, held.conn)
        return held.conn

    def _release(self, conn: sqlite3.Connection) -> None:
        with self._connections_lock:
            self._connections.discard(conn)
        conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _one(self, sql: str, *args: object) -> str | None:
        row = self._conn().execute(sql, args).fetchone()
        return None if row is None else str(row[0])

    def _all(self, sql: str, *args: object) -> list[str]:
        return [str(row[0]) for row in self._conn().execute(sql, args).fetchall()]

    def _insert(self, sql: str, *args: object) -> bool:
        with self._write() as conn:
            return conn.execute(sql, args).rowcount == 1

    def close(self) -> None:
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
