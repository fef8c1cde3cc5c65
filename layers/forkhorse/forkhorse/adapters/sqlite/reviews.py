"""Reviews, their current execution and Flow-Next receipts in SQLite."""

import sqlite3
from datetime import datetime

from forkhorse.adapters.sqlite.database import SqliteDatabase, dump
from forkhorse.adapters.sqlite.leases import claim_in
from forkhorse.domain.model import (
    Approval,
    InvalidatedExecution,
    Review,
    current_receipt,
    is_current_running,
    require_no_digest,
    started_execution,
)
from forkhorse.domain.receipts import ReceiptSummary, Trigger, interrupted_summary

_ABOVE_EVERY_SEQ = 2**63 - 1  # SQLite's largest integer


class SqliteReviews(SqliteDatabase):
    @staticmethod
    def _review_in(conn: sqlite3.Connection, review_id: str) -> Review | None:
        row = conn.execute("SELECT data FROM reviews WHERE id = ?", (review_id,)).fetchone()
        return None if row is None else Review.model_validate_json(row[0])

    @staticmethod
    def _save_review(conn: sqlite3.Connection, review: Review) -> None:
        running = review.execution is not None and review.execution.is_running
        conn.execute(
            "UPDATE reviews SET data = ?, running = ? WHERE id = ?",
            (dump(review), int(running), review.id),
        )

    def create_review(self, review: Review) -> bool:
        running = review.execution is not None and review.execution.is_running
        with self._write() as conn:
            created = conn.execute(
                "INSERT OR IGNORE INTO reviews (id, project_id, running, latest, data)"
                " VALUES (?, ?, ?, 1, ?)",
                (review.id, review.project_id, int(running), dump(review)),
            )
            if created.rowcount != 1:
                return False
            conn.execute(  # the review it replaces leaves the active set
                "UPDATE reviews SET latest = 0 WHERE project_id = ? AND latest = 1 AND id != ?"
                " AND data ->> '$.fork_id' = ? AND data ->> '$.packet_id' = ?",
                (review.project_id, review.id, review.fork_id, review.packet_id),
            )
            return True

    def get_review(self, review_id: str) -> Review | None:
        return self._review_in(self._conn(), review_id)

    def list_reviews(self, project_id: str) -> list[Review]:
        rows = self._all("SELECT data FROM reviews WHERE project_id = ? ORDER BY seq", project_id)
        return [Review.model_validate_json(row) for row in rows]

    def list_active_reviews(self, project_id: str) -> list[Review]:
        sql = "SELECT data FROM reviews WHERE project_id = ? AND latest = 1 ORDER BY seq"
        return [Review.model_validate_json(row) for row in self._all(sql, project_id)]

    def list_reviews_page(
        self, project_id: str, before_review_id: str | None, limit: int
    ) -> list[Review] | None:
        before = _ABOVE_EVERY_SEQ
        if before_review_id is not None:
            sql = "SELECT seq FROM reviews WHERE id = ? AND project_id = ?"
            found = self._one(sql, before_review_id, project_id)
            if found is None:
                return None
            before = int(found)
        sql = "SELECT data FROM reviews WHERE project_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?"
        rows = self._all(sql, project_id, before, limit)
        return [Review.model_validate_json(row) for row in rows]

    def start_execution(
        self,
        review_id: str,
        commit: str,
        trigger: Trigger,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        execution = started_execution(commit, trigger, generation, summary)
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
        execution = started_execution(commit, "review-created", generation, summary)
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
            claim = claim_in(conn, review.packet_id)
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
            expected = (expected_generation, expected_digest)
            if compare_receipt and current_receipt(review) != expected:
                return False
            self._save_review(conn, review.model_copy(update={"approval": approval}))
            return True

    # --- Flow-Next review receipts ----------------------------------------------------
    def put_review_receipt(self, review_id: str, digest: str) -> None:
        self._insert("INSERT OR IGNORE INTO review_receipts VALUES (?, ?)", review_id, digest)

    def list_review_receipts(self, review_id: str) -> list[str]:
        sql = "SELECT digest FROM review_receipts WHERE review_id = ? ORDER BY digest"
        return self._all(sql, review_id)
