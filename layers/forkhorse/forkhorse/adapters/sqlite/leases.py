"""Claims on packets and the per-project workflow lease in SQLite."""

import json
import sqlite3
from datetime import datetime, timedelta

from forkhorse.adapters.sqlite.database import EPOCH, SqliteDatabase, dump
from forkhorse.domain.model import Claim, Lease, fence_holds


def claim_in(conn: sqlite3.Connection, packet_id: str) -> Claim | None:
    row = conn.execute("SELECT data FROM claims WHERE packet_id = ?", (packet_id,)).fetchone()
    return None if row is None else Claim.model_validate_json(row[0])


def lease_in(conn: sqlite3.Connection, project_id: str) -> Lease | None:
    row = conn.execute("SELECT data FROM leases WHERE project_id = ?", (project_id,))
    found = row.fetchone()
    return None if found is None else Lease.model_validate_json(found[0])


class SqliteLeases(SqliteDatabase):
    # --- claims on packets -----------------------------------------------------------
    def claim_packet(
        self, packet_id: str, agent_id: str, ttl: timedelta, now: datetime
    ) -> Claim | None:
        with self._write() as conn:
            held = claim_in(conn, packet_id)
            if held is not None and held.is_live(now) and held.agent_id != agent_id:
                return None
            claim = Claim(
                packet_id=packet_id, agent_id=agent_id, claimed_at=now, expires_at=now + ttl
            )
            conn.execute("INSERT OR REPLACE INTO claims VALUES (?, ?)", (packet_id, dump(claim)))
            return claim

    def release_claim(self, packet_id: str, agent_id: str) -> bool:
        with self._write() as conn:
            held = claim_in(conn, packet_id)
            if held is None or held.agent_id != agent_id:
                return False
            conn.execute("DELETE FROM claims WHERE packet_id = ?", (packet_id,))
            return True

    def live_claim(self, packet_id: str, now: datetime) -> Claim | None:
        held = claim_in(self._conn(), packet_id)
        return held if held is not None and held.is_live(now) else None

    def live_claims(self, packet_ids: list[str], now: datetime) -> dict[str, Claim]:
        rows = self._conn().execute(
            "SELECT data FROM claims WHERE packet_id IN (SELECT value FROM json_each(?))",
            (json.dumps(packet_ids),),
        )
        held = (Claim.model_validate_json(data) for (data,) in rows)
        return {claim.packet_id: claim for claim in held if claim.is_live(now)}

    # --- the workflow lease ----------------------------------------------------------
    def _save_lease(self, conn: sqlite3.Connection, lease: Lease) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?)",
            (lease.project_id, lease.holder, lease.token, dump(lease)),
        )

    def acquire_lease(
        self, project_id: str, holder: str, ttl: timedelta, now: datetime
    ) -> int | None:
        with self._write() as conn:
            held = lease_in(conn, project_id)
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
            held = lease_in(conn, project_id)
            if held is None or held.holder != holder or not fence_holds(held, token, now):
                return False
            self._save_lease(conn, held.model_copy(update={"expires_at": now + ttl}))
            return True

    def release_lease(self, project_id: str, holder: str, token: int) -> bool:
        with self._write() as conn:
            held = lease_in(conn, project_id)
            if held is None or (held.holder, held.token) != (holder, token):
                return False
            # Keep the row (expired) so the next token still grows.
            self._save_lease(conn, held.model_copy(update={"expires_at": EPOCH}))
            return True

    def check_fence(self, project_id: str, token: int, now: datetime) -> bool:
        return fence_holds(lease_in(self._conn(), project_id), token, now)
