"""Promotions and the ledger in SQLite, fenced by the workflow lease."""

import json
import sqlite3
from collections.abc import Collection
from datetime import datetime

from forkhorse.adapters.sqlite.database import SqliteDatabase, dump
from forkhorse.adapters.sqlite.leases import lease_in
from forkhorse.domain.model import (
    OPEN_PROMOTION_STATES,
    LedgerEntry,
    Promotion,
    Refusal,
    SettledState,
    check_settlement,
    fence_holds,
    may_request,
    may_settle,
    settled,
)

# Queries on `data ->> '$.review_id'`, `'$.promotion_id'` and `'$.commit'` spell them as the
# JSON indexes in `database._SCHEMA` do: SQLite uses an index only for the same expression.
_PAST_EVERY_SEQ = 2**63 - 1  # SQLite's largest integer


class SqlitePromotions(SqliteDatabase):
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
            (promotion.state, dump(promotion), promotion.project_id, promotion.id),
        )

    def request_promotion(self, promotion: Promotion, now: datetime) -> bool:
        queued = promotion.model_copy(update={"state": "queued", "settled_at": None})
        with self._write() as conn:
            rows = conn.execute(
                "SELECT data FROM promotions WHERE project_id = ? AND data ->> '$.review_id' = ?",
                (promotion.project_id, promotion.review_id),
            )
            same_review = [Promotion.model_validate_json(row[0]) for row in rows]
            if not may_request(same_review, now):
                return False
            inserted = conn.execute(
                "INSERT OR IGNORE INTO promotions (project_id, id, state, data)"
                " VALUES (?, ?, ?, ?)",
                (promotion.project_id, promotion.id, queued.state, dump(queued)),
            )
            return inserted.rowcount == 1

    def begin_promotion(self, promotion: Promotion, fencing_token: int, now: datetime) -> bool:
        pending = promotion.model_copy(update={"state": "pending", "settled_at": None})
        with self._write() as conn:
            if not fence_holds(lease_in(conn, promotion.project_id), fencing_token, now):
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
                (promotion.project_id, promotion.id, pending.state, dump(pending)),
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
            if not fence_holds(lease_in(conn, project_id), fencing_token, now):
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
                    (project_id, dump(ledger_entry)),
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

    def latest_promotion(self, project_id: str, review_id: str) -> Promotion | None:
        data = self._one(
            "SELECT data FROM promotions WHERE project_id = ? AND data ->> '$.review_id' = ?"
            " ORDER BY seq DESC LIMIT 1",
            project_id,
            review_id,
        )
        return None if data is None else Promotion.model_validate_json(data)

    def ledger_entry(self, project_id: str, promotion_id: str) -> LedgerEntry | None:
        sql = "SELECT data FROM ledger WHERE project_id = ? AND data ->> '$.promotion_id' = ?"
        data = self._one(sql, project_id, promotion_id)
        return None if data is None else LedgerEntry.model_validate_json(data)

    def ledger_page(
        self, project_id: str, before_promotion_id: str | None, limit: int
    ) -> list[LedgerEntry] | None:
        conn = self._conn()
        upper = _PAST_EVERY_SEQ
        if before_promotion_id is not None:
            found = conn.execute(
                "SELECT seq FROM ledger WHERE project_id = ? AND data ->> '$.promotion_id' = ?",
                (project_id, before_promotion_id),
            ).fetchone()
            if found is None:
                return None
            upper = found[0]
        rows = conn.execute(
            "SELECT data FROM ledger WHERE project_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            (project_id, upper, limit),
        )
        return [LedgerEntry.model_validate_json(row[0]) for row in rows]

    def done_promotions(
        self, project_id: str, review_ids: Collection[str]
    ) -> dict[str, tuple[Promotion, LedgerEntry]]:
        # One index seek per review for its newest entry, however often it was promoted.
        rows = self._conn().execute(
            "WITH latest (seq) AS (SELECT (SELECT seq FROM ledger WHERE project_id = :project"
            " AND data ->> '$.review_id' = wanted.value ORDER BY seq DESC LIMIT 1)"
            " FROM json_each(:reviews) AS wanted)"
            " SELECT ledger.data, promotions.data FROM latest"
            " JOIN ledger ON ledger.seq = latest.seq"
            " JOIN promotions ON promotions.project_id = ledger.project_id"
            " AND promotions.id = ledger.data ->> '$.promotion_id'",
            {"project": project_id, "reviews": json.dumps(sorted(set(review_ids)))},
        )
        done: dict[str, tuple[Promotion, LedgerEntry]] = {}
        for entry_data, promotion_data in rows:
            entry = LedgerEntry.model_validate_json(entry_data)
            done[entry.review_id] = (Promotion.model_validate_json(promotion_data), entry)
        return done

    def published_commits(self, project_id: str, commits: Collection[str]) -> set[str]:
        rows = self._conn().execute(
            "SELECT DISTINCT data ->> '$.commit' FROM ledger"
            " WHERE project_id = ? AND data ->> '$.commit' IN (SELECT value FROM json_each(?))",
            (project_id, json.dumps(list(commits))),
        )
        return {str(row[0]) for row in rows}
