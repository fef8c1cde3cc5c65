"""Correlation keys: what each handler's log lines name, and that nothing carries over
from one invocation to the next."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forkhorse.observability import api_keys, lambda_handler, logger, promote_keys, run_keys

from tests.support.lambda_context import FakeLambdaContext
from tests.support.observability import captured_log, json_lines

EVENTS = Path(__file__).resolve().parents[2] / "events"


def _event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())  # type: ignore[no-any-return]


def test_keys_come_from_the_paths_and_runs_the_events_name() -> None:
    assert api_keys({"rawPath": "/projects/p-1/state"}) == {"project": "p-1", "review": None}
    assert api_keys({"rawPath": "/reviews/r-1/promote"}) == {"project": None, "review": "r-1"}
    assert api_keys({"rawPath": "/git/p-1/canonical.git/info/refs"})["project"] == "p-1"
    assert run_keys(_event("run_finalize.json")) == {
        "project": "demo",
        "review": "review-1",
        "generation": "6f1c2f4e-8a4b-4c55-9d0e-3d2b1a0f9e11",
    }
    settle = promote_keys(_event("promote_settle.json"))
    assert settle["promotion"] == "5b0f3c9e-8d41-4a67-9f2e-1c7a6b3d4e58"
    assert settle["project"] == "proj-7c1e4b2a9d3f"


def test_an_invocations_keys_do_not_carry_over_to_the_next() -> None:
    @lambda_handler(api_keys)
    def handler(event: dict[str, Any], context: Any) -> None:
        logger.info("handled")

    with captured_log() as log:
        handler({"rawPath": "/projects/p-1/state"}, FakeLambdaContext())
        handler({"rawPath": "/openapi.json"}, FakeLambdaContext())
    first, second = json_lines(log.getvalue())
    assert first["project"] == "p-1"
    assert "project" not in second
    assert second["function_request_id"] == FakeLambdaContext.aws_request_id
