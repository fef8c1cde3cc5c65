"""Local mode: a restart settles what a dead process's promote left, without waiting for
that process's workflow lease (it is still live here: an hour-long TTL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from forkhorse.domain.model import Promotion
from forkhorse.service.facade import ServiceSettings
from forkhorse.service.promote.request import JOB_STOPPED
from forkhorse.wiring.local import build_local_app, build_local_runtime

from tests.support.store import COMMIT, seed_review

RECOVERY_SECONDS = 30.0


def test_a_restart_stops_a_queued_promote_and_reconciles_a_pending_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runtime = build_local_runtime(home)
    now = datetime.now(UTC)
    seed_review(runtime.store, now=now)
    runtime.git.store("proj").create_canonical()
    queued = Promotion(
        id="promotion-queued",
        project_id="proj",
        review_id="r1",
        commit=COMMIT,
        state="queued",
        started_at=now,
        deadline=now + timedelta(hours=1),
    )
    assert runtime.store.request_promotion(queued, now)
    # The dead workflow's lease (its holder is its promotion) stays live for an hour.
    token = runtime.store.acquire_lease("proj", queued.id, timedelta(hours=1), now)
    assert token is not None
    pending = queued.model_copy(update={"state": "pending"})
    assert runtime.store.begin_promotion(pending, token, now)
    seed_review(runtime.store, "r2", packet_id="p2", now=now)
    waiting = queued.model_copy(update={"id": "promotion-waiting", "review_id": "r2"})
    assert runtime.store.request_promotion(waiting, now)
    runtime.close()  # the process "dies": one job pending, one still queued

    restarted = build_local_runtime(home)
    app = build_local_app(restarted, ServiceSettings(public_url="http://127.0.0.1:1"))
    try:
        assert app.promotes.recovered(RECOVERY_SECONDS), "recovery waited for the dead lease"
        for promotion_id in ("promotion-queued", "promotion-waiting"):
            settled = restarted.store.get_promotion("proj", promotion_id)
            assert settled is not None
            assert settled.state == "failed"
            assert settled.refusal is not None
            assert settled.refusal.error == JOB_STOPPED
        assert restarted.store.open_promotion("proj") is None, "the project is no longer fenced"
        assert restarted.store.check_fence("proj", token, datetime.now(UTC)) is False
    finally:
        app.close()
