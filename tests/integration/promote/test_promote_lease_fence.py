"""A lease stolen after expiry: the old workflow's fenced write is refused, nothing moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from forkhorse.domain.model import Promotion
from forkhorse.service.facade import Service, ServiceSettings
from forkhorse.service.promote.contracts import PromoteState
from forkhorse.service.promote.request import LEASE_LOST
from forkhorse.service.promote.steps import promote_write
from forkhorse.wiring.local import build_local_runtime

from tests.support.store import COMMIT, seed_review


def test_a_write_after_the_lease_was_stolen_is_refused(tmp_path: Path) -> None:
    runtime = build_local_runtime(tmp_path / "home")
    try:
        now = datetime.now(UTC) - timedelta(hours=1)
        seed_review(runtime.store, now=now)
        runtime.git.store("proj").create_canonical()
        promotion = Promotion(
            id="p-old", project_id="proj", review_id="r1", commit=COMMIT, started_at=now
        )
        token = runtime.store.acquire_lease("proj", promotion.id, timedelta(minutes=1), now)
        assert token is not None
        assert runtime.store.begin_promotion(promotion, token, now)
        assert runtime.store.arm_promotion("proj", promotion.id, None, token, now)
        # The old lease lapsed; another workflow takes it.
        assert runtime.store.acquire_lease("proj", "p-new", timedelta(hours=1), datetime.now(UTC))
        context = Service(
            runtime.store, runtime.git, runtime.supervisor, runtime.deps.clock, ServiceSettings()
        ).context
        state = PromoteState(project_id="proj", promotion_id=promotion.id, token=token)
        assert promote_write(context, state).outcome == "failed"
        settled = runtime.store.get_promotion("proj", promotion.id)
        assert settled is not None
        assert settled.refusal is not None
        assert settled.refusal.error == LEASE_LOST
        assert runtime.git.store("proj").head() is None, "canonical never moved"
        assert runtime.store.ledger("proj") == []
    finally:
        runtime.close()
