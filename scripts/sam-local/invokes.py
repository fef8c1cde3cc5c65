"""`sam local invoke` of every function with its sample event from events/, asserted."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from aws_local import CLUSTER
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.dynamodb.waits import DynamoDbFullWaits
from forkhorse.domain.model import Principal
from forkhorse.ports.waits import HeldWait
from forkhorse.service.identity import token_hash
from forkhorse.service.promote.rules import LEASE_LOST, NO_PROMOTION
from forkhorse.service.promote.steps import REFUSED_ERROR
from sam import Sam

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
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
    authorizer = sam.invoke("BearerTokenAuthorizerFunction", EVENTS / "api_authorizer_request.json")
    _expect(
        "BearerTokenAuthorizerFunction",
        authorizer,
        {"isAuthorized": True, "context": {"principalId": SAMPLE_AGENT, "kind": "agent"}},
    )
    for event in ("push.json", "push_follow.json"):
        _expect("PushFunction", sam.invoke("PushFunction", EVENTS / event), {"moved": []})
    git = sam.invoke("GitHttpFunction", EVENTS / "git_http_info_refs.json")
    _expect("GitHttpFunction", git["statusCode"], 401)
    promote_functions(sam)
    runner_functions(sam)
    log_publisher(sam)


def api_function(sam: Sam) -> None:
    created = sam.invoke("ApiFunction", EVENTS / "api_create_project.json")
    assert created["statusCode"] == 201, created
    clone_url = _body(created)["project"]["cloneUrl"]
    _expect("ApiFunction", clone_url.startswith(f"{PUBLIC_URL}/git/"), True)
    state = sam.invoke("ApiFunction", EVENTS / "api_state_agent.json")
    _expect(
        "ApiFunction", (state["statusCode"], _body(state)), (404, {"error": "Project not found."})
    )


def promote_functions(sam: Sam) -> None:
    """The PromoteRun steps on the sample promotion, which the table does not hold: each
    refuses as Settle's Catch reads it, or passes the state on; none writes anything.
    (The walk promotes a real review through all of them.)"""
    no_promotion = {"kind": "not-found", "error": NO_PROMOTION}
    for step in ("acquire", "verify", "write"):
        _expect_refusal(sam, step, no_promotion)
    # The sample holds token 7 of a lease that was never taken: fenced off.
    _expect_refusal(sam, "start_run", {"kind": "conflict", "error": LEASE_LOST})
    released = sam.invoke("PromoteReleaseFunction", EVENTS / "promote_release.json")
    _expect("PromoteReleaseFunction", released, _sample("promote_release.json"))
    settled = sam.invoke("PromoteSettleFunction", EVENTS / "promote_settle.json")
    _expect(
        "PromoteSettleFunction", settled, _sample("promote_settle.json") | {"outcome": "failed"}
    )


def _expect_refusal(sam: Sam, step: str, refusal: dict[str, Any]) -> None:
    function = "Promote" + step.title().replace("_", "") + "Function"
    error = sam.invoke(function, EVENTS / f"promote_{step}.json", raises=REFUSED_ERROR)
    _expect(function, json.loads(error["errorMessage"]), refusal)


def _sample(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return loaded


def runner_functions(sam: Sam) -> None:
    """The steps on the sample run, whose commit is absent: each fails closed, as recorded."""
    dropped = sam.invoke("QuickCheckFunction", EVENTS / "quick_check.json")
    _expect("QuickCheckFunction", (dropped["name"], len(dropped["evidence"])), ("brand", 64))
    recorded = sam.invoke_with("QuickRecordFunction", dropped)
    _expect("QuickRecordFunction", recorded["outcome"], "infrastructure-error")
    dropped = sam.invoke("QuickCheckJsFunction", EVENTS / "quick_check_js.json")
    _expect(
        "QuickCheckJsFunction", (dropped["name"], len(dropped["evidence"])), ("brand-quick", 64)
    )
    full_check_functions(sam)
    final = sam.invoke("FinalizeFunction", EVENTS / "run_finalize_infrastructure_error.json")
    _expect("FinalizeFunction", final, {"attached": False, "status": "infrastructure-error"})
    recovery = sam.invoke("RunRecoveryFunction", EVENTS / "sfn_status_change.json")
    _expect("RunRecoveryFunction", recovery, {"finalized": False})
    # Everything the invokes above wrote is younger than the grace period.
    collected = sam.invoke("CollectGarbageFunction", EVENTS / "collect_garbage.json")
    nothing = {"records": 0, "orphans": 0, "packs": 0, "bytesReclaimed": 0, "projectsSkipped": 0}
    _expect("CollectGarbageFunction", collected, nothing)


def log_publisher(sam: Sam) -> None:
    """A publish request, as each append sends one, on what the invokes above appended (the
    sample project's settings among them): the function publishes all of it. (The walk
    runs its schedule, and verifies what it published.)"""
    published = sam.invoke("LogPublisherFunction", EVENTS / "log_publish.json")
    everything = published["size"] == published["published"] and published["size"] > 0
    _expect("LogPublisherFunction", (everything, sorted(published)), (True, ["published", "size"]))


def full_check_functions(sam: Sam) -> None:
    """The full check's wait for its task token, through the packaged functions: FullStart
    answers a check refused at start at once; a held check whose task (in moto's ECS)
    stopped is collected and answered once by FullStopped; FullOvertime ends a timed-out
    one from the same hold."""
    started = sam.invoke("FullStartFunction", EVENTS / "run_full_start.json")
    _expect("FullStartFunction", started, {"waiting": False})  # its commit is absent
    sample = _sample("run_full_overtime.json")
    task_arn = _stopped_task(sample["run"]["generation"])
    _hold(sample, task_arn)
    event = _sample("full_stopped.json")
    event["resources"] = [task_arn]
    event["detail"] |= {"taskArn": task_arn, "startedBy": sample["run"]["generation"]}
    _expect(
        "FullStoppedFunction", sam.invoke_with("FullStoppedFunction", event), {"answered": True}
    )
    again = sam.invoke_with("FullStoppedFunction", event)
    _expect("FullStoppedFunction (the same event again)", again, {"answered": False})
    ended = sam.invoke("FullOvertimeFunction", EVENTS / "run_full_overtime.json")
    _expect(
        "FullOvertimeFunction", (ended["done"], ended["outcome"]), (True, "infrastructure-error")
    )


def _stopped_task(generation: str) -> str:
    """A task of the check's task definition in moto's ECS, started for the run, stopped.
    (moto's server cannot run an awsvpc task, so the stand-in runs on an EC2 container
    instance with the check's two containers, which is all FullStopped reads.)"""
    ecs, ec2 = boto3.client("ecs"), boto3.client("ec2")
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"][0]
    identity = {
        "instanceId": instance["InstanceId"],
        "region": "us-east-1",
        "availabilityZone": "us-east-1a",
        "privateIp": "10.0.0.1",
        "instanceType": "t2.micro",
        "imageId": "ami-12c6146b",
        "accountId": "123456789012",
    }
    ecs.register_container_instance(cluster=CLUSTER, instanceIdentityDocument=json.dumps(identity))
    containers = [
        {"name": name, "image": "sam-local.invalid/default", "essential": essential, "memory": 256}
        for name, essential in (("fetch", False), ("check", True))
    ]
    ecs.register_task_definition(family="forkhorse-check", containerDefinitions=containers)
    started = ecs.run_task(cluster=CLUSTER, taskDefinition="forkhorse-check", startedBy=generation)
    task: str = started["tasks"][0]["taskArn"]
    ecs.stop_task(cluster=CLUSTER, task=task, reason="sam-local: the check ended")
    return task


def _hold(sample: dict[str, Any], task_arn: str) -> None:
    """What FullStart holds for a started check: the state's token and the task's handle."""
    run, check = sample["run"], sample["check"]
    now = datetime.now(UTC).timestamp()
    functions = json.loads((Path(__file__).parent / "env-vars.json").read_text())["Parameters"]
    images = json.loads(functions["FORKHORSE_IMAGES"])
    handle = {
        "platform": "fargate",
        "container_id": task_arn,
        "project": run["projectId"],
        "execution": run["generation"],
        "generation": run["generation"],
        "check": check["name"],
        "image_ref": images["default"]["reference"],
        "started_at": now,
        "deadline": now + check["timeoutSeconds"],
    }
    progress = {"run": run, "check": check, "done": False, "handle": handle}
    wait = HeldWait(token="sam-local-token", progress=json.dumps(progress))  # noqa: S106
    waits = DynamoDbFullWaits(boto3.client("dynamodb"), _env("TABLE_NAME"))
    waits.hold(run["generation"], check["name"], wait, datetime.now(UTC) + timedelta(hours=1))
