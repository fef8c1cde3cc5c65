"""The local Store: one SQLite file in WAL mode under the state directory.

Each thread gets its own connection, closed when the thread ends (the local runner starts
a thread per run); every change runs in a `BEGIN IMMEDIATE` transaction, so SQLite
serializes writers and each compare-and-set below is checked and applied under the same
write lock.
"""

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel

from forkhorse.domain.model import (
    OPEN_PROMOTION_STATES,
    Approval,
    Claim,
    Execution,
    Fork,
    InvalidatedExecution,
    Lease,
    LedgerEntry,
    Packet,
    Principal,
    Project,
    ProjectPolicy,
    ProjectSettings,
    Promotion,
    Refusal,
    Review,
    SettledState,
    check_settlement,
    fence_holds,
    is_current_running,
    may_request,
    may_settle,
    require_no_digest,
    settled,
    with_effective_settings,
)
from forkhorse.domain.receipts import ReceiptSummary, Trigger, interrupted_summary
from forkhorse.ports.store import RecordRemoval, StaleRecord

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
    running INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS reviews_by_project ON reviews (project_id, seq);
CREATE INDEX IF NOT EXISTS reviews_running ON reviews (running);
CREATE TABLE IF NOT EXISTS promotions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, project_id TEXT NOT NULL, id TEXT NOT NULL,
    state TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (project_id, id));
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, project_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    project_id TEXT PRIMARY KEY, holder TEXT NOT NULL, token INTEGER NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS record_chunks (
    digest TEXT NOT NULL, idx INTEGER NOT NULL, text TEXT NOT NULL,
    written_at INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (digest, idx));
CREATE TABLE IF NOT EXISTS records (
    digest TEXT PRIMARY KEY, chunk_count INTEGER NOT NULL, written_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS review_receipts (
    review_id TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (review_id, digest));
"""


_STALE_PAGE = 500
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _add_written_at(conn: sqlite3.Connection) -> None:
    """Databases from before the collector lack `written_at`; their rows read as written
    at the epoch, so old orphans become collectable (referenced records are still kept)."""
    for table in ("record_chunks", "records"):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "written_at" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN written_at INTEGER NOT NULL DEFAULT 0")


def _us(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _dump(model: BaseModel) -> str:
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


class SqliteStore:
    def __init__(self, state_dir: Path) -> None:
        self.path = _private_database(state_dir)
        self._local = threading.local()
        self._connections: set[sqlite3.Connection] = set()
        self._connections_lock = threading.Lock()
        with closing(self._connect()) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            _add_written_at(conn)

    # --- connections and transactions ------------------------------------------------
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

    # --- principals ----------------------------------------------------------------
    def create_principal(self, principal: Principal, token_hash: str) -> bool:
        return self._insert(
            "INSERT OR IGNORE INTO principals (id, kind, token_hash, data) VALUES (?, ?, ?, ?)",
            principal.id,
            principal.kind,
            token_hash,
            _dump(principal),
        )

    def get_principal(self, principal_id: str) -> Principal | None:
        data = self._one("SELECT data FROM principals WHERE id = ?", principal_id)
        return None if data is None else Principal.model_validate_json(data)

    def list_agents(self) -> list[Principal]:
        rows = self._all("SELECT data FROM principals WHERE kind = 'agent' ORDER BY id")
        return [Principal.model_validate_json(row) for row in rows]

    def find_principal_by_token_hash(self, token_hash: str) -> Principal | None:
        data = self._one("SELECT data FROM principals WHERE token_hash = ?", token_hash)
        principal = None if data is None else Principal.model_validate_json(data)
        return None if principal is None or principal.revoked else principal

    def revoke_principal(self, principal_id: str) -> bool:
        with self._write() as conn:
            row = conn.execute("SELECT data FROM principals WHERE id = ?", (principal_id,))
            found = row.fetchone()
            if found is None:
                return False
            revoked = Principal.model_validate_json(found[0]).model_copy(update={"revoked": True})
            conn.execute(
                "UPDATE principals SET data = ?, token_hash = ? WHERE id = ?",
                (_dump(revoked), f"revoked:{principal_id}", principal_id),
            )
            return True

    # --- projects, members, forks, packets --------------------------------------------
    def create_project(self, project: Project) -> bool:
        return self._insert(
            "INSERT OR IGNORE INTO projects (id, data) VALUES (?, ?)", project.id, _dump(project)
        )

    def get_project(self, project_id: str) -> Project | None:
        data = self._one("SELECT data FROM projects WHERE id = ?", project_id)
        return None if data is None else with_effective_settings(Project.model_validate_json(data))

    def list_projects(self) -> list[Project]:
        rows = self._all("SELECT data FROM projects ORDER BY id")
        return [with_effective_settings(Project.model_validate_json(row)) for row in rows]

    def set_settings(self, project_id: str, settings: ProjectSettings) -> bool:
        return self._update_project(project_id, settings=settings)

    def set_policy(self, project_id: str, policy: ProjectPolicy) -> bool:
        return self._update_project(project_id, policy=policy)

    def _update_project(self, project_id: str, **update: BaseModel) -> bool:
        with self._write() as conn:
            found = conn.execute("SELECT data FROM projects WHERE id = ?", (project_id,)).fetchone()
            if found is None:
                return False
            project = Project.model_validate_json(found[0]).model_copy(update=update)
            conn.execute("UPDATE projects SET data = ? WHERE id = ?", (_dump(project), project_id))
            return True

    def add_member(self, project_id: str, agent_id: str) -> None:
        self._insert("INSERT OR IGNORE INTO members VALUES (?, ?)", project_id, agent_id)

    def is_member(self, project_id: str, agent_id: str) -> bool:
        sql = "SELECT agent_id FROM members WHERE project_id = ? AND agent_id = ?"
        return self._one(sql, project_id, agent_id) is not None

    def list_members(self, project_id: str) -> list[str]:
        sql = "SELECT agent_id FROM members WHERE project_id = ? ORDER BY agent_id"
        return self._all(sql, project_id)

    def create_fork(self, fork: Fork) -> bool:
        return self._insert(
            "INSERT OR IGNORE INTO forks VALUES (?, ?, ?)", fork.project_id, fork.id, _dump(fork)
        )

    def get_fork(self, project_id: str, fork_id: str) -> Fork | None:
        sql = "SELECT data FROM forks WHERE project_id = ? AND id = ?"
        data = self._one(sql, project_id, fork_id)
        return None if data is None else Fork.model_validate_json(data)

    def list_forks(self, project_id: str) -> list[Fork]:
        rows = self._all("SELECT data FROM forks WHERE project_id = ? ORDER BY id", project_id)
        return [Fork.model_validate_json(row) for row in rows]

    def create_packet(self, packet: Packet) -> bool:
        return self._insert(
            "INSERT OR IGNORE INTO packets VALUES (?, ?, ?)",
            packet.project_id,
            packet.id,
            _dump(packet),
        )

    def get_packet(self, project_id: str, packet_id: str) -> Packet | None:
        sql = "SELECT data FROM packets WHERE project_id = ? AND id = ?"
        data = self._one(sql, project_id, packet_id)
        return None if data is None else Packet.model_validate_json(data)

    def list_packets(self, project_id: str) -> list[Packet]:
        rows = self._all("SELECT data FROM packets WHERE project_id = ? ORDER BY id", project_id)
        return [Packet.model_validate_json(row) for row in rows]

    # --- claims --------------------------------------------------------------------
    @staticmethod
    def _claim_in(conn: sqlite3.Connection, packet_id: str) -> Claim | None:
        row = conn.execute("SELECT data FROM claims WHERE packet_id = ?", (packet_id,)).fetchone()
        return None if row is None else Claim.model_validate_json(row[0])

    def claim_packet(
        self, packet_id: str, agent_id: str, ttl: timedelta, now: datetime
    ) -> Claim | None:
        with self._write() as conn:
            held = self._claim_in(conn, packet_id)
            if held is not None and held.is_live(now) and held.agent_id != agent_id:
                return None
            claim = Claim(
                packet_id=packet_id, agent_id=agent_id, claimed_at=now, expires_at=now + ttl
            )
            conn.execute("INSERT OR REPLACE INTO claims VALUES (?, ?)", (packet_id, _dump(claim)))
            return claim

    def release_claim(self, packet_id: str, agent_id: str) -> bool:
        with self._write() as conn:
            held = self._claim_in(conn, packet_id)
            if held is None or held.agent_id != agent_id:
                return False
            conn.execute("DELETE FROM claims WHERE packet_id = ?", (packet_id,))
            return True

    def live_claim(self, packet_id: str, now: datetime) -> Claim | None:
        held = self._claim_in(self._conn(), packet_id)
        return held if held is not None and held.is_live(now) else None

    # --- reviews -------------------------------------------------------------------
    @staticmethod
    def _review_in(conn: sqlite3.Connection, review_id: str) -> Review | None:
        row = conn.execute("SELECT data FROM reviews WHERE id = ?", (review_id,)).fetchone()
        return None if row is None else Review.model_validate_json(row[0])

    @staticmethod
    def _save_review(conn: sqlite3.Connection, review: Review) -> None:
        running = review.execution is not None and review.execution.is_running
        conn.execute(
            "UPDATE reviews SET data = ?, running = ? WHERE id = ?",
            (_dump(review), int(running), review.id),
        )

    def create_review(self, review: Review) -> bool:
        running = review.execution is not None and review.execution.is_running
        return self._insert(
            "INSERT OR IGNORE INTO reviews (id, project_id, running, data) VALUES (?, ?, ?, ?)",
            review.id,
            review.project_id,
            int(running),
            _dump(review),
        )

    def get_review(self, review_id: str) -> Review | None:
        return self._review_in(self._conn(), review_id)

    def list_reviews(self, project_id: str) -> list[Review]:
        rows = self._all("SELECT data FROM reviews WHERE project_id = ? ORDER BY seq", project_id)
        return [Review.model_validate_json(row) for row in rows]

    def start_execution(
        self,
        review_id: str,
        commit: str,
        trigger: Trigger,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        execution = Execution(
            generation=generation,
            commit=commit,
            trigger=trigger,
            summary=summary.model_copy(update={"digest": None}),
        )
        with self._write() as conn:
            review = self._review_in(conn, review_id)
            if review is None:
                return False
            self._save_review(conn, review.model_copy(update={"execution": execution}))
            return True

    def retarget_review(
        self,
        review_id: str,
        expected_commit: str,
        commit: str,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        execution = Execution(
            generation=generation,
            commit=commit,
            trigger="review-created",
            summary=summary.model_copy(update={"digest": None}),
        )
        with self._write() as conn:
            review = self._review_in(conn, review_id)
            if review is None or review.commit != expected_commit:
                return False
            moved = {"commit": commit, "approval": None, "execution": execution}
            self._save_review(conn, review.model_copy(update=moved))
            return True

    def update_summary(self, review_id: str, generation: str, summary: ReceiptSummary) -> bool:
        require_no_digest(summary)
        with self._write() as conn:
            review = self._review_in(conn, review_id)
            execution = None if review is None else review.execution
            if review is None or execution is None or not is_current_running(execution, generation):
                return False
            updated = execution.model_copy(update={"summary": summary})
            self._save_review(conn, review.model_copy(update={"execution": updated}))
            return True

    def discard_execution(self, review_id: str, generation: str) -> bool:
        with self._write() as conn:
            review = self._review_in(conn, review_id)
            if review is None or not is_current_running(review.execution, generation):
                return False
            self._save_review(conn, review.model_copy(update={"execution": None}))
            return True

    def attach(
        self,
        review_id: str,
        commit: str,
        generation: str,
        trigger: Trigger,
        digest: str,
        summary: ReceiptSummary,
        now: datetime,
    ) -> bool:
        with self._write() as conn:
            review = self._review_in(conn, review_id)
            if review is None or review.execution is None:
                return False
            execution = review.execution
            if not is_current_running(execution, generation) or (
                execution.commit,
                execution.trigger,
            ) != (commit, trigger):
                return False
            claim = self._claim_in(conn, review.packet_id)
            if claim is None or claim.agent_id != review.agent_id or not claim.is_live(now):
                return False
            attached = execution.model_copy(
                update={"summary": summary.model_copy(update={"digest": digest})}
            )
            self._save_review(conn, review.model_copy(update={"execution": attached}))
            return True

    def invalidate_running(self, now: datetime) -> list[InvalidatedExecution]:
        invalidated: list[InvalidatedExecution] = []
        with self._write() as conn:
            rows = conn.execute("SELECT data FROM reviews WHERE running = 1").fetchall()
            for (data,) in rows:
                review = Review.model_validate_json(data)
                execution = review.execution
                if execution is None:
                    continue
                failed = execution.model_copy(
                    update={"summary": interrupted_summary(execution.summary, now)}
                )
                self._save_review(conn, review.model_copy(update={"execution": failed}))
                invalidated.append(
                    InvalidatedExecution(
                        review_id=review.id,
                        project_id=review.project_id,
                        generation=execution.generation,
                    )
                )
        return invalidated

    def approve(
        self,
        review_id: str,
        approval: Approval,
        expected_digest: str | None,
        expected_generation: str | None,
        *,
        compare_receipt: bool = True,
    ) -> bool:
        with self._write() as conn:
            review = self._review_in(conn, review_id)
            if review is None or review.commit != approval.commit:
                return False
            execution = review.execution
            current = (
                (None, None) if execution is None else (execution.generation, execution.digest)
            )
            if compare_receipt and current != (expected_generation, expected_digest):
                return False
            self._save_review(conn, review.model_copy(update={"approval": approval}))
            return True

    # --- promotions and the ledger --------------------------------------------------
    def _lease_in(self, conn: sqlite3.Connection, project_id: str) -> Lease | None:
        row = conn.execute("SELECT data FROM leases WHERE project_id = ?", (project_id,))
        found = row.fetchone()
        return None if found is None else Lease.model_validate_json(found[0])

    def _open_promotion_in(self, conn: sqlite3.Connection, project_id: str) -> Promotion | None:
        row = conn.execute(
            "SELECT data FROM promotions WHERE project_id = ? AND state IN (?, ?, ?)",
            (project_id, *sorted(OPEN_PROMOTION_STATES)),
        ).fetchone()
        return None if row is None else Promotion.model_validate_json(row[0])

    @staticmethod
    def _promotion_in(
        conn: sqlite3.Connection, project_id: str, promotion_id: str
    ) -> Promotion | None:
        row = conn.execute(
            "SELECT data FROM promotions WHERE project_id = ? AND id = ?",
            (project_id, promotion_id),
        ).fetchone()
        return None if row is None else Promotion.model_validate_json(row[0])

    @staticmethod
    def _save_promotion(conn: sqlite3.Connection, promotion: Promotion) -> None:
        conn.execute(
            "UPDATE promotions SET state = ?, data = ? WHERE project_id = ? AND id = ?",
            (promotion.state, _dump(promotion), promotion.project_id, promotion.id),
        )

    def request_promotion(self, promotion: Promotion, now: datetime) -> bool:
        queued = promotion.model_copy(update={"state": "queued", "settled_at": None})
        with self._write() as conn:
            rows = conn.execute(
                "SELECT data FROM promotions WHERE project_id = ?", (promotion.project_id,)
            )
            same_review = [
                found
                for found in (Promotion.model_validate_json(row[0]) for row in rows)
                if found.review_id == promotion.review_id
            ]
            if not may_request(same_review, now):
                return False
            inserted = conn.execute(
                "INSERT OR IGNORE INTO promotions (project_id, id, state, data)"
                " VALUES (?, ?, ?, ?)",
                (promotion.project_id, promotion.id, queued.state, _dump(queued)),
            )
            return inserted.rowcount == 1

    def begin_promotion(self, promotion: Promotion, fencing_token: int, now: datetime) -> bool:
        pending = promotion.model_copy(update={"state": "pending", "settled_at": None})
        with self._write() as conn:
            if not fence_holds(self._lease_in(conn, promotion.project_id), fencing_token, now):
                return False
            if self._open_promotion_in(conn, promotion.project_id) is not None:
                return False
            existing = self._promotion_in(conn, promotion.project_id, promotion.id)
            if existing is not None:
                if existing.state != "queued":
                    return False
                self._save_promotion(conn, pending)
                return True
            conn.execute(
                "INSERT INTO promotions (project_id, id, state, data) VALUES (?, ?, ?, ?)",
                (promotion.project_id, promotion.id, pending.state, _dump(pending)),
            )
            return True

    def arm_promotion(
        self,
        project_id: str,
        promotion_id: str,
        digest: str | None,
        fencing_token: int,
        now: datetime,
    ) -> bool:
        with self._write() as conn:
            if not fence_holds(self._lease_in(conn, project_id), fencing_token, now):
                return False
            promotion = self._promotion_in(conn, project_id, promotion_id)
            if promotion is None or promotion.state != "pending":
                return False
            self._save_promotion(
                conn, promotion.model_copy(update={"state": "writing", "digest": digest})
            )
            return True

    def settle_promotion(
        self,
        project_id: str,
        promotion_id: str,
        state: SettledState,
        ledger_entry: LedgerEntry | None,
        now: datetime,
        refusal: Refusal | None = None,
    ) -> bool:
        check_settlement(state, ledger_entry, refusal)
        with self._write() as conn:
            promotion = self._promotion_in(conn, project_id, promotion_id)
            if promotion is None or not may_settle(promotion, state):
                return False
            self._save_promotion(conn, settled(promotion, state, now, refusal))
            if ledger_entry is not None:
                conn.execute(
                    "INSERT INTO ledger (project_id, data) VALUES (?, ?)",
                    (project_id, _dump(ledger_entry)),
                )
            return True

    def get_promotion(self, project_id: str, promotion_id: str) -> Promotion | None:
        sql = "SELECT data FROM promotions WHERE project_id = ? AND id = ?"
        data = self._one(sql, project_id, promotion_id)
        return None if data is None else Promotion.model_validate_json(data)

    def list_promotions(self, project_id: str) -> list[Promotion]:
        sql = "SELECT data FROM promotions WHERE project_id = ? ORDER BY seq"
        return [Promotion.model_validate_json(row) for row in self._all(sql, project_id)]

    def open_promotion(self, project_id: str) -> Promotion | None:
        return self._open_promotion_in(self._conn(), project_id)

    def ledger(self, project_id: str) -> list[LedgerEntry]:
        rows = self._all("SELECT data FROM ledger WHERE project_id = ? ORDER BY seq", project_id)
        return [LedgerEntry.model_validate_json(row) for row in rows]

    # --- the workflow lease ----------------------------------------------------------
    def _save_lease(self, conn: sqlite3.Connection, lease: Lease) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?)",
            (lease.project_id, lease.holder, lease.token, _dump(lease)),
        )

    def acquire_lease(
        self, project_id: str, holder: str, ttl: timedelta, now: datetime
    ) -> int | None:
        with self._write() as conn:
            held = self._lease_in(conn, project_id)
            if held is not None and held.is_live(now) and held.holder != holder:
                return None
            token = 1 if held is None else held.token + 1
            lease = Lease(project_id=project_id, holder=holder, token=token, expires_at=now + ttl)
            self._save_lease(conn, lease)
            return token

    def renew_lease(
        self, project_id: str, holder: str, token: int, ttl: timedelta, now: datetime
    ) -> bool:
        with self._write() as conn:
            held = self._lease_in(conn, project_id)
            if held is None or held.holder != holder or not fence_holds(held, token, now):
                return False
            self._save_lease(conn, held.model_copy(update={"expires_at": now + ttl}))
            return True

    def release_lease(self, project_id: str, holder: str, token: int) -> bool:
        with self._write() as conn:
            held = self._lease_in(conn, project_id)
            if held is None or (held.holder, held.token) != (holder, token):
                return False
            # Keep the row (expired) so the next token still grows.
            self._save_lease(conn, held.model_copy(update={"expires_at": _EPOCH}))
            return True

    def check_fence(self, project_id: str, token: int, now: datetime) -> bool:
        return fence_holds(self._lease_in(self._conn(), project_id), token, now)

    # --- records -------------------------------------------------------------------
    @staticmethod
    def _insert_chunks(
        conn: sqlite3.Connection, digest: str, chunks: Sequence[str], written_at: int
    ) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO record_chunks VALUES (?, ?, ?, ?)",
            ((digest, index, chunk, written_at) for index, chunk in enumerate(chunks)),
        )

    @staticmethod
    def _touch_manifest(conn: sqlite3.Connection, digest: str, written_at: int) -> bool:
        touched = conn.execute(
            "UPDATE records SET written_at = max(written_at, ?) WHERE digest = ?",
            (written_at, digest),
        )
        return touched.rowcount == 1

    def _write_chunks(self, digest: str, chunks: Sequence[str], written_at: int) -> None:
        with self._write() as conn:
            self._insert_chunks(conn, digest, chunks, written_at)

    def _write_manifest(self, digest: str, chunks: Sequence[str], written_at: int) -> None:
        with self._write() as conn:
            if self._touch_manifest(conn, digest, written_at):
                return  # a concurrent put published the same bytes
            stored = conn.execute(
                "SELECT count(*) FROM record_chunks WHERE digest = ? AND idx < ?",
                (digest, len(chunks)),
            ).fetchone()[0]
            if stored != len(chunks):  # a collection took chunks of this unfinished put
                self._insert_chunks(conn, digest, chunks, written_at)
            conn.execute("INSERT INTO records VALUES (?, ?, ?)", (digest, len(chunks), written_at))

    def put_record_chunks(self, digest: str, chunks: Sequence[str], now: datetime) -> None:
        written_at = _us(now)
        with self._write() as conn:
            if self._touch_manifest(conn, digest, written_at):
                return  # content-addressed: the stored record is already these bytes
        self._write_chunks(digest, chunks, written_at)
        self._write_manifest(digest, chunks, written_at)

    def get_record_chunks(self, digest: str) -> list[str] | None:
        count = self._one("SELECT chunk_count FROM records WHERE digest = ?", digest)
        if count is None:
            return None
        sql = "SELECT text FROM record_chunks WHERE digest = ? AND idx < ? ORDER BY idx"
        return self._all(sql, digest, int(count))

    def stale_records(self, written_before: datetime) -> Iterator[StaleRecord]:
        cutoff, after = _us(written_before), ""
        while True:  # pages by digest, so deleting between pages is safe
            rows = self._conn().execute(_STALE_SQL, (cutoff, cutoff, after, _STALE_PAGE))
            page = rows.fetchall()
            for digest, has_manifest in page:
                yield StaleRecord(str(digest), bool(has_manifest))
            if len(page) < _STALE_PAGE:
                return
            after = str(page[-1][0])

    def delete_stale_record(self, digest: str, written_before: datetime) -> RecordRemoval:
        cutoff = _us(written_before)
        with self._write() as conn:
            manifest = conn.execute(
                "DELETE FROM records WHERE digest = ? AND written_at < ?", (digest, cutoff)
            ).rowcount
            if conn.execute("SELECT 1 FROM records WHERE digest = ?", (digest,)).fetchone():
                return RecordRemoval(manifest=False, chunks=0)  # written again since
            chunks = conn.execute(
                "DELETE FROM record_chunks WHERE digest = ? AND written_at < ?", (digest, cutoff)
            ).rowcount
            return RecordRemoval(manifest=manifest == 1, chunks=chunks)

    # --- Flow-Next review receipts ----------------------------------------------------
    def put_review_receipt(self, review_id: str, digest: str) -> None:
        self._insert("INSERT OR IGNORE INTO review_receipts VALUES (?, ?)", review_id, digest)

    def list_review_receipts(self, review_id: str) -> list[str]:
        sql = "SELECT digest FROM review_receipts WHERE review_id = ? ORDER BY digest"
        return self._all(sql, review_id)


_STALE_SQL = """
SELECT digest, max(manifest) FROM (
    SELECT digest, 1 AS manifest FROM records WHERE written_at < ?
    UNION ALL
    SELECT DISTINCT c.digest, 0 FROM record_chunks c WHERE c.written_at < ?
        AND NOT EXISTS (SELECT 1 FROM records r WHERE r.digest = c.digest))
WHERE digest > ? GROUP BY digest ORDER BY digest LIMIT ?
"""
