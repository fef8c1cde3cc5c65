"""`sam local invoke` of every function with its sample event from events/, asserted."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from forkhorse.adapters.dynamodb_store import DynamoDbStore
from forkhorse.domain.model import Principal
from forkhorse.service.identity import token_hash
from sam import Sam

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
STATE = ROOT / ".aws-sam/sam-local"
SAMPLE_AGENT = "agent-a-0123456789ab"
SAMPLE_TOKEN = "fh_example-token"  # noqa: S105 (events/api_authorizer_request.json)
PUBLIC_URL = "https://sam-local.invalid"


def seed_sample_agent() -> None:
    """The agent whose token the authorizer's sample event carries (stored as a hash)."""
    store = DynamoDbStore(boto3.client("dynamodb"), _env("TABLE_NAME"))
    agent = Principal(kind="agent", id=SAMPLE_AGENT, name="a", created_at=datetime.now(UTC))
    store.create_principal(agent, token_hash(SAMPLE_TOKEN))


def _env(name: str) -> str:
    return os.environ[name]


def _body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def _expect(function: str, got: Any, expected: Any) -> None:
    assert got == expected, f"{function}: expected {expected!r}, got {got!r}"
    print(f"sam-local: ok  {function}: {json.dumps(got)[:120]}", flush=True)


def invoke_every_function(sam: Sam) -> None:
    seed_sample_agent()
    api_function(sam)
    authorizer = sam.invoke("AgentAuthorizerFunction", EVENTS / "api_authorizer_request.json")
    _expect(
        "AgentAuthorizerFunction",
        authorizer,
        {"isAuthorized": True, "context": {"principalId": SAMPLE_AGENT, "kind": "agent"}},
    )
    for event in ("push.json", "push_follow.json"):
        _expect("PushFunction", sam.invoke("PushFunction", EVENTS / event), {"moved": []})
    git = sam.invoke("GitHttpFunction", EVENTS / "git_http_info_refs.json")
    _expect("GitHttpFunction", git["statusCode"], 401)
    # The sample job names no queued promotion: the job finds nothing to run and writes nothing.
    promote = sam.invoke("PromoteFunction", EVENTS / "promote_job.json")
    _expect("PromoteFunction", promote["state"], None)
    runner_functions(sam)


def api_function(sam: Sam) -> None:
    created = sam.invoke("ApiFunction", EVENTS / "api_create_project.json")
    assert created["statusCode"] == 201, created
    clone_url = _body(created)["project"]["cloneUrl"]
    _expect("ApiFunction", clone_url.startswith(f"{PUBLIC_URL}/git/"), True)
    state = sam.invoke("ApiFunction", EVENTS / "api_state_agent.json")
    _expect(
        "ApiFunction", (state["statusCode"], _body(state)), (404, {"error": "Project not found."})
    )


def runner_functions(sam: Sam) -> None:
    """The steps on the sample run, whose commit is absent: each fails closed, as recorded."""
    dropped = sam.invoke("QuickCheckFunction", EVENTS / "quick_check.json")
    _expect("QuickCheckFunction", (dropped["name"], len(dropped["evidence"])), ("brand", 64))
    recorded = sam.invoke("QuickRecordFunction", _written("quick_record.json", dropped))
    _expect("QuickRecordFunction", recorded["outcome"], "infrastructure-error")
    started = sam.invoke("FullStartFunction", EVENTS / "run_full_start.json")
    _expect(
        "FullStartFunction", (started["done"], started["outcome"]), (True, "infrastructure-error")
    )
    polled = sam.invoke("FullPollFunction", EVENTS / "run_full_poll.json")
    _expect("FullPollFunction", polled.get("done"), True)
    final = sam.invoke("FinalizeFunction", EVENTS / "run_finalize_infrastructure_error.json")
    _expect("FinalizeFunction", final, {"attached": False, "status": "infrastructure-error"})
    recovery = sam.invoke("RunRecoveryFunction", EVENTS / "sfn_status_change.json")
    _expect("RunRecoveryFunction", recovery, {"finalized": False})


def _written(name: str, event: dict[str, Any]) -> Path:
    """An event produced by the previous step, as Step Functions would pass it on."""
    path = STATE / name
    path.write_text(json.dumps(event), encoding="utf-8")
    return path
