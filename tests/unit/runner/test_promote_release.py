"""Release frees the workflow's lease whatever became of its promotion."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.ports.clock import SystemClock
from forkhorse.service.promote.contracts import PromoteState
from forkhorse.service.promote.steps import PromoteDeps, promote_release

ROOT = Path(__file__).resolve().parents[3]
TTL = timedelta(minutes=20)


def test_a_lease_whose_promotion_is_gone_is_still_released(tmp_path: Path) -> None:
    event = json.loads((ROOT / "events/promote_release.json").read_text())
    store = SqliteStore(tmp_path)
    now = datetime.now(UTC)
    token = store.acquire_lease(event["projectId"], event["promotionId"], TTL, now)
    assert token is not None
    event["token"] = token
    deps = cast(PromoteDeps, SimpleNamespace(store=store, clock=SystemClock()))

    state = PromoteState.model_validate(event)
    assert promote_release(deps, state).promotion_id == event["promotionId"]

    assert not store.check_fence(event["projectId"], token, now)
    assert store.acquire_lease(event["projectId"], "another-promotion", TTL, now) is not None
    store.close()
