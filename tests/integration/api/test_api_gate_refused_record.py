"""A stored record whose bytes match their digest but whose shape the receipt schema refuses
(a quick check without `runtime`, or one that ran in `container`) is altered evidence: approve
answers 409 with an `altered` reason and `GET …/gate` shows it, never a 500 (issue 30, item 5).
Through the in-process API over the local app, with the record attached by the Store's own
compare-and-set."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from forkhorse.records import RecordCorruptedError, get_record, put_json
from forkhorse.service.approvals import GATE_REFUSED
from forkhorse.wiring.local import LocalApp

from tests.support.api_world import ApiWorld, api_event, local_api_world
from tests.support.store import record

REFUSED = "altered: The attached record is not a valid receipt record."


def _no_runtime(check: dict[str, Any]) -> None:
    del check["runtime"]


def _container(check: dict[str, Any]) -> None:
    check["runtime"] = "container"


def _attach_refused_record(world: ApiWorld, tamper: Callable[[dict[str, Any]], None]) -> str:
    """A running review, then a record the schema refuses (its digest right) attached to it."""
    [review_id] = world.seed_reviews(1)
    context = world.service.context
    store, now = context.store, context.clock.now()
    valid = record(generation=f"g-{review_id}").model_copy(
        update={
            "project": world.ids["project"],
            "review_id": review_id,
            "commit": world.ids["commit"],
        }
    )
    wire = valid.model_dump(mode="json")
    assert wire["checks"][0]["tier"] == "quick"
    tamper(wire["checks"][0])
    digest = put_json(store, wire, now)
    with pytest.raises((ValueError, RecordCorruptedError)):
        get_record(store, digest)  # the schema refuses what the digest vouches for
    summary = valid.summary(digest)
    assert store.attach(
        review_id, world.ids["commit"], f"g-{review_id}", "review-created", digest, summary, now
    )
    return review_id


@pytest.mark.parametrize("tamper", [_no_runtime, _container], ids=["no-runtime", "container"])
def test_approve_and_gate_refuse_a_schema_refused_record_as_altered(
    mocked_local_app: LocalApp, tamper: Callable[[dict[str, Any]], None]
) -> None:
    world = local_api_world(mocked_local_app)
    review_id = _attach_refused_record(world, tamper)
    base = f"/projects/{world.ids['project']}/reviews/{review_id}"

    body = json.dumps({"commit": world.ids["commit"]}).encode()
    answer = world.api.handle(api_event("POST", f"{base}/approve", world.owner_token, body))
    refused = json.loads(answer["body"])
    assert answer["statusCode"] == 409, refused
    assert refused["error"] == GATE_REFUSED
    assert refused["reasons"] == [REFUSED]

    status, gate = world.call("GET", f"{base}/gate")
    assert status == 200, gate
    assert gate["approve"] == {"allowed": False, "reasons": [REFUSED]}

    status, receipt = world.call("GET", f"{base}/receipt")
    assert status == 409, receipt
    assert receipt["error"] == "The attached record is not a valid receipt record."
    assert world.service.context.store.get_review(review_id).approval is None  # type: ignore[union-attr]
