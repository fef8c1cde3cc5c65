"""The Fargate ContainerPort against moto (ECS, CloudWatch Logs, S3, EC2 for the subnets)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from forkhorse.adapters.containers.fargate import (
    INIT_COMMAND,
    TIMEOUT_REASON,
    FargateContainerPort,
    FargateImage,
    FargateSettings,
)
from forkhorse.domain.logs import LOG_BUDGET_BYTES
from forkhorse.ports.containers import (
    CleanupUnconfirmed,
    ContainerHandle,
    ContainerRefused,
    ContainerSpec,
    ContainerStartFailed,
    ImageUnresolved,
    LaunchThrottled,
)
from forkhorse.ports.git import ArchiveLink
from moto.ec2.models.elastic_network_interfaces import NetworkInterface
from moto.ecs.models import Container, ecs_backends
from moto.moto_api import state_manager

from tests.integration.containers.helpers import new_execution
from tests.support.moto_atomic import atomic_mock_aws

REGION = "us-east-1"
ACCOUNT = "123456789012"
CLUSTER = "forkhorse-checks"
LOG_GROUP = "/forkhorse/checks"
BUCKET = "forkhorse-snapshots"
CHECK_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/forkhorse-default@sha256:" + "c" * 64
INIT_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/forkhorse-default@sha256:" + "1" * 64


@dataclass
class Aws:
    ecs: Any
    logs: Any
    s3: Any
    subnet: str
    security_group: str
    task_definition: str


def task_definition(
    check_image: str = CHECK_IMAGE, init_image: str = INIT_IMAGE, cpu_architecture: str = "X86_64"
) -> dict[str, Any]:
    """The shape template.yaml declares: a trusted init container, then the check container."""
    volume = {"sourceVolume": "workspace", "containerPath": "/workspace"}
    return {
        "family": "forkhorse-check",
        "runtimePlatform": {"cpuArchitecture": cpu_architecture, "operatingSystemFamily": "LINUX"},
        "networkMode": "awsvpc",
        "requiresCompatibilities": ["FARGATE"],
        "cpu": "1024",
        "memory": "2048",
        "volumes": [{"name": "workspace"}, {"name": "fetch-tmp"}, {"name": "check-tmp"}],
        "containerDefinitions": [
            {
                "name": "fetch",
                "image": init_image,
                "essential": False,
                "memory": 256,
                "mountPoints": [volume, {"sourceVolume": "fetch-tmp", "containerPath": "/tmp"}],
            },
            {
                "name": "check",
                "image": check_image,
                "essential": True,
                "memory": 1536,
                "user": "1000",
                "readonlyRootFilesystem": True,
                "workingDirectory": "/workspace",
                "dependsOn": [{"containerName": "fetch", "condition": "SUCCESS"}],
                "mountPoints": [volume, {"sourceVolume": "check-tmp", "containerPath": "/tmp"}],
                "logConfiguration": {
                    "logDriver": "awslogs",
                    "options": {
                        "awslogs-group": LOG_GROUP,
                        "awslogs-region": REGION,
                        "awslogs-stream-prefix": "forkhorse",
                    },
                },
            },
        ],
    }


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    # moto 5.2.5 builds a task's ENI attachment from an attribute its ENIs lack.
    monkeypatch.setattr(
        NetworkInterface, "private_dns_name", property(lambda eni: "ip.ec2.internal"), raising=False
    )
    # Tasks stay RUNNING until a test stops them (moto advances them on every describe).
    state_manager.set_transition(
        model_name="ecs::task", transition={"progression": "manual", "times": 10**6}
    )
    with atomic_mock_aws(monkeypatch):
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
        group = ec2.create_security_group(GroupName="checks", Description="no egress", VpcId=vpc)
        ecs = boto3.client("ecs", region_name=REGION)
        ecs.create_cluster(clusterName=CLUSTER)
        registered = ecs.register_task_definition(**task_definition())
        logs = boto3.client("logs", region_name=REGION)
        logs.create_log_group(logGroupName=LOG_GROUP)
        s3 = boto3.client("s3", region_name=REGION, config=Config(signature_version="s3v4"))
        s3.create_bucket(Bucket=BUCKET)
        yield Aws(
            ecs,
            logs,
            s3,
            subnet,
            group["GroupId"],
            registered["taskDefinition"]["taskDefinitionArn"],
        )
    state_manager.unset_transition("ecs::task")


def settings(aws: Aws, **images: FargateImage) -> FargateSettings:
    return FargateSettings(
        cluster=CLUSTER,
        subnets=(aws.subnet,),
        security_groups=(aws.security_group,),
        images=images or {"default": FargateImage(CHECK_IMAGE, aws.task_definition)},
        log_group=LOG_GROUP,
        stop_confirm_seconds=4,
    )


@pytest.fixture
def port(aws: Aws) -> FargateContainerPort:
    return FargateContainerPort(settings(aws), aws.ecs, aws.logs, sleep=lambda _: None)


@pytest.fixture
def link(aws: Aws) -> ArchiveLink:
    """What the git store's `publish_archive` gives: a presigned URL valid for 180 seconds."""
    aws.s3.put_object(Bucket=BUCKET, Key="archives/tree.tar", Body=b"tar bytes")
    url = aws.s3.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "archives/tree.tar"}, ExpiresIn=180
    )
    return ArchiveLink(tree="t" * 40, url=url, expires_in_seconds=180)


def spec(
    link: ArchiveLink | Path, *, execution: str | None = None, check: str = "test"
) -> ContainerSpec:
    return ContainerSpec(
        project="proj",
        execution=execution or new_execution(),
        generation="gen-1",
        check=check,
        image_ref=CHECK_IMAGE,
        run="npm test",
        timeout_seconds=600,
        source=link,
    )


def moto_task(arn: str) -> Any:
    return ecs_backends[ACCOUNT][REGION].tasks[CLUSTER][arn]


def stop_with(aws: Aws, arn: str, exit_codes: dict[str, int | None], reason: str = "") -> None:
    """Make the task stop the way ECS reports it: each container with its own exit code."""
    task = moto_task(arn)
    definition = ecs_backends[ACCOUNT][REGION].describe_task_definition(aws.task_definition)
    containers = []
    for name, code in exit_codes.items():
        container = Container(definition)
        container.name, container.last_status = name, "STOPPED"
        container.exitCode = code  # None: ECS reported no exit code for it
        containers.append(container)
    task.containers = containers
    task.last_status = task.desired_status = "STOPPED"
    task.stopped_reason = reason or "Essential container in task exited"


# --- preflight ---------------------------------------------------------------------------


def test_preflight_resolves_the_configured_digest(port: FargateContainerPort) -> None:
    assert port.preflight("default") == CHECK_IMAGE
    assert (port.platform, port.evidence) == ("fargate", "container")


@pytest.mark.parametrize(
    ("configured", "check_image", "init_image"),
    [
        ("repo/forkhorse-default:24", "repo/forkhorse-default:24", INIT_IMAGE),  # mutable
        (CHECK_IMAGE, CHECK_IMAGE.replace("c" * 64, "d" * 64), INIT_IMAGE),  # definition drifted
        (CHECK_IMAGE, CHECK_IMAGE, "repo/fetch:latest"),  # the init image is mutable
    ],
)
def test_preflight_refuses_mutable_or_mismatched_images(
    aws: Aws, configured: str, check_image: str, init_image: str
) -> None:
    registered = aws.ecs.register_task_definition(**task_definition(check_image, init_image))
    arn = registered["taskDefinition"]["taskDefinitionArn"]
    port = FargateContainerPort(
        settings(aws, default=FargateImage(configured, arn)), aws.ecs, aws.logs
    )
    with pytest.raises(ImageUnresolved):
        port.preflight("default")


def test_preflight_refuses_unknown_names_and_task_definitions(aws: Aws) -> None:
    missing = FargateImage(CHECK_IMAGE, "arn:aws:ecs:us-east-1:123456789012:task-definition/nope:1")
    port = FargateContainerPort(settings(aws, default=missing), aws.ecs, aws.logs)
    with pytest.raises(ImageUnresolved):
        port.preflight("busybox")
    with pytest.raises(ImageUnresolved):
        port.preflight("default")


# --- start -------------------------------------------------------------------------------


def test_start_runs_one_fargate_task_in_isolated_subnets(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    assert "X-Amz-Expires=180" in link.url
    check = spec(link)
    handle = port.start(check)
    task = moto_task(handle.container_id)
    assert task.launch_type == "FARGATE"
    assert task.started_by == check.execution
    network = task.network_configuration["awsvpcConfiguration"]
    assert network == {
        "subnets": [aws.subnet],
        "securityGroups": [aws.security_group],
        "assignPublicIp": "DISABLED",
    }
    overrides = {item["name"]: item for item in task.overrides["containerOverrides"]}
    assert overrides["fetch"]["command"] == list(INIT_COMMAND)
    assert overrides["fetch"]["environment"] == [{"name": "SNAPSHOT_URL", "value": link.url}]
    assert overrides["check"]["command"] == ["sh", "-c", "npm test"]
    assert "environment" not in overrides["check"]  # the URL is the init container's only
    tags = {tag["key"]: tag["value"] for tag in task.tags}
    assert tags["forkhorse.execution"] == check.execution
    assert tags["forkhorse.check"] == "test"
    assert port.poll(handle) == "running"


def test_start_needs_a_180_second_archive_link(
    port: FargateContainerPort, link: ArchiveLink
) -> None:
    with pytest.raises(ContainerStartFailed):
        port.start(spec(Path("/tmp")))
    long_lived = ArchiveLink(tree=link.tree, url=link.url, expires_in_seconds=3600)
    with pytest.raises(ContainerStartFailed):
        port.start(spec(long_lived))


def test_start_refuses_a_reference_that_is_not_configured(
    port: FargateContainerPort, link: ArchiveLink
) -> None:
    other = CHECK_IMAGE.replace("c" * 64, "e" * 64)
    with pytest.raises(ImageUnresolved):
        port.start(ContainerSpec("p", new_execution(), "g", "c", other, "true", 60, link))


def test_a_second_task_for_the_same_execution_and_check_is_refused(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    execution = new_execution()
    handle = port.start(spec(link, execution=execution))
    another_step = FargateContainerPort(settings(aws), aws.ecs, aws.logs)  # no shared memory
    with pytest.raises(ContainerRefused):
        another_step.start(spec(link, execution=execution))
    another_step.start(spec(link, execution=execution, check="other"))
    # Even once it stopped, its task is never reused or repeated.
    stop_with(aws, handle.container_id, {"fetch": 0, "check": 0})
    with pytest.raises(ContainerRefused):
        FargateContainerPort(settings(aws), aws.ecs, aws.logs).start(
            spec(link, execution=execution)
        )


# --- collect: every container's exit code, explicitly ------------------------------------


@pytest.mark.parametrize(
    ("codes", "outcome", "exit_code", "message"),
    [
        ({"fetch": 0, "check": 0}, "passed", 0, "Exited with code 0."),
        ({"fetch": 0, "check": 3}, "failed", 3, "Exited with code 3."),
        (
            {"fetch": 2, "check": 0},
            "infrastructure-error",
            None,
            "The snapshot could not be fetched into the container.",
        ),
        (
            {"fetch": 0, "check": None},
            "infrastructure-error",
            None,
            "The check container stopped without an exit code.",
        ),
        (
            {"fetch": 0},
            "infrastructure-error",
            None,
            "The check container stopped without an exit code.",
        ),
        (
            {"check": 0},
            "infrastructure-error",
            None,
            "The fetch container stopped without an exit code.",
        ),
    ],
)
def test_collect_reads_every_container_exit_code(
    aws: Aws,
    port: FargateContainerPort,
    link: ArchiveLink,
    codes: dict[str, int | None],
    outcome: str,
    exit_code: int | None,
    message: str,
) -> None:
    handle = port.start(spec(link))
    stop_with(aws, handle.container_id, codes)
    assert port.poll(handle) == "exited"
    result = port.collect(handle)
    assert (result.outcome, result.exit_code, result.message) == (outcome, exit_code, message)


def test_a_task_that_merely_stopped_is_not_a_pass(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    handle = port.start(spec(link))
    state_manager.unset_transition("ecs::task")  # moto's own lifecycle: it stops by itself
    while port.poll(handle) == "running":
        time.sleep(0.01)
    result = port.collect(handle)
    assert result.outcome == "infrastructure-error"


def test_collect_of_a_running_task_is_refused(
    port: FargateContainerPort, link: ArchiveLink
) -> None:
    handle = port.start(spec(link))
    with pytest.raises(ContainerStartFailed):
        port.collect(handle)


def test_a_task_past_its_deadline_is_stopped_and_timed_out(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    handle = port.start(spec(link))
    late = handle.model_copy(update={"deadline": time.time() - 1})
    assert port.poll(late) == "timed-out"
    task = moto_task(handle.container_id)
    assert (task.desired_status, task.stopped_reason) == ("STOPPED", TIMEOUT_REASON)
    # Containers reporting 0 after the stop cannot turn the timeout into a pass.
    stop_with(aws, handle.container_id, {"fetch": 0, "check": 0}, reason=TIMEOUT_REASON)
    assert port.poll(late) == "timed-out"
    assert port.collect(late).outcome == "timed-out"


def test_collect_past_the_deadline_waits_until_ecs_has_stopped_the_task(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    """StopTask returns before the task is STOPPED: collecting a timed-out check waits
    (bounded) for ECS, and records it timed out, not an infrastructure error."""
    handle = port.start(spec(link))
    late = handle.model_copy(update={"deadline": time.time() - 1})
    assert port.poll(late) == "timed-out"
    moto_task(handle.container_id).last_status = "DEPROVISIONING"  # ECS still stopping it
    waits: list[float] = []

    def ecs_stops_it(seconds: float) -> None:
        waits.append(seconds)
        stop_with(aws, handle.container_id, {"fetch": 0, "check": 137}, reason=TIMEOUT_REASON)

    port.sleep = ecs_stops_it
    assert port.collect(late).outcome == "timed-out"
    assert waits == [2.0]


def test_a_handle_survives_json_between_runner_steps(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    handle = port.start(spec(link))
    wire = handle.model_dump_json()
    stop_with(aws, handle.container_id, {"fetch": 0, "check": 0})
    next_step = FargateContainerPort(settings(aws), aws.ecs, aws.logs)
    restored = ContainerHandle.model_validate_json(wire)
    assert next_step.poll(restored) == "exited"
    assert next_step.collect(restored).outcome == "passed"
    next_step.destroy(restored)


# --- logs --------------------------------------------------------------------------------


def put_log(aws: Aws, handle: ContainerHandle, messages: list[str]) -> None:
    stream = f"forkhorse/check/{handle.container_id.rsplit('/', 1)[-1]}"
    aws.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    now = int(time.time() * 1000)
    for start in range(0, len(messages), 1000):
        events = [
            {"timestamp": now + index, "message": message}
            for index, message in enumerate(messages[start : start + 1000])
        ]
        aws.logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)


def test_logs_come_from_cloudwatch(aws: Aws, port: FargateContainerPort, link: ArchiveLink) -> None:
    handle = port.start(spec(link))
    put_log(aws, handle, ["> test", "ok"])
    stop_with(aws, handle.container_id, {"fetch": 0, "check": 0})
    result = port.collect(handle)
    assert result.stdout.text == "> test\nok\n"
    assert result.stderr.text == ""


def test_logs_are_bounded_like_every_other_log(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    handle = port.start(spec(link))
    lines = [f"line {index:05d} " + "x" * 90 for index in range(3000)]
    put_log(aws, handle, lines)
    stop_with(aws, handle.container_id, {"fetch": 0, "check": 1})
    stdout = port.collect(handle).stdout
    assert stdout.total_bytes == sum(len(line) + 1 for line in lines)
    assert len(stdout.text.encode()) <= LOG_BUDGET_BYTES
    assert stdout.text.startswith("line 00000 ")
    assert stdout.text.endswith(lines[-1] + "\n")


def test_a_missing_log_stream_is_an_empty_log(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    handle = port.start(spec(link))
    stop_with(aws, handle.container_id, {"fetch": 0, "check": 0})
    assert port.collect(handle).stdout.total_bytes == 0


# --- destroy and orphans -----------------------------------------------------------------


def test_destroy_stops_the_task_and_confirms_it(
    port: FargateContainerPort, link: ArchiveLink
) -> None:
    handle = port.start(spec(link))
    port.destroy(handle)
    assert moto_task(handle.container_id).last_status == "STOPPED"
    with pytest.raises(ContainerRefused):
        port.poll(handle)
    with pytest.raises(ContainerRefused):
        port.collect(handle)


class IgnoringStops:
    """An ECS client whose StopTask is accepted but never takes effect."""

    def __init__(self, ecs: Any) -> None:
        self._ecs = ecs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ecs, name)

    def stop_task(self, **_: Any) -> dict[str, Any]:
        return {}


def test_cleanup_that_cannot_be_confirmed_fails_closed(aws: Aws, link: ArchiveLink) -> None:
    waits: list[float] = []
    port = FargateContainerPort(settings(aws), IgnoringStops(aws.ecs), aws.logs, sleep=waits.append)  # type: ignore[arg-type]
    handle = port.start(spec(link))
    with pytest.raises(CleanupUnconfirmed):
        port.destroy(handle)
    assert sum(waits) >= 4  # it waited the configured time before giving up


def test_orphans_of_dead_executions_are_stopped(
    aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    live, dead = new_execution(), new_execution()
    live_handle = port.start(spec(link, execution=live))
    dead_handle = port.start(spec(link, execution=dead))
    unmanaged = aws.ecs.run_task(
        cluster=CLUSTER,
        taskDefinition=aws.task_definition,
        launchType="FARGATE",
        networkConfiguration={
            "awsvpcConfiguration": {"subnets": [aws.subnet], "securityGroups": []}
        },
    )["tasks"][0]["taskArn"]
    restarted = FargateContainerPort(settings(aws), aws.ecs, aws.logs, sleep=lambda _: None)
    assert restarted.cleanup_orphans(frozenset({live})) == [dead_handle.container_id]
    assert moto_task(dead_handle.container_id).last_status == "STOPPED"
    assert moto_task(live_handle.container_id).last_status == "RUNNING"
    assert moto_task(unmanaged).last_status == "RUNNING"


def test_settings_come_from_the_function_environment() -> None:
    loaded = FargateSettings.from_environment(
        {
            "FORKHORSE_CLUSTER": CLUSTER,
            "FORKHORSE_SUBNETS": "subnet-a,subnet-b",
            "FORKHORSE_SECURITY_GROUPS": "sg-1",
            "FORKHORSE_CHECK_LOG_GROUP": LOG_GROUP,
            "FORKHORSE_IMAGES": json.dumps(
                {"default": {"reference": CHECK_IMAGE, "taskDefinition": "td"}}
            ),
        }
    )
    assert loaded.subnets == ("subnet-a", "subnet-b")
    assert loaded.images["default"] == FargateImage(CHECK_IMAGE, "td")  # x86_64 when unsaid


# --- CPU architecture --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("architectures", "expected"),
    [
        ("arm64,x86_64", FargateImage(CHECK_IMAGE, "td", "td-arm")),
        ("x86_64", FargateImage(CHECK_IMAGE, "td")),
        ("arm64", FargateImage(CHECK_IMAGE, None, "td-arm")),
    ],
)
def test_an_image_declares_its_architectures(architectures: str, expected: FargateImage) -> None:
    entry = {"reference": CHECK_IMAGE, "architectures": architectures}
    entry |= {"taskDefinition": "td", "arm64TaskDefinition": "td-arm"}
    assert FargateImage.from_entry(entry) == expected


def test_an_image_with_an_unknown_or_no_architecture_is_refused() -> None:
    with pytest.raises(ValueError, match="riscv64"):
        FargateImage.from_entry({"reference": CHECK_IMAGE, "architectures": "riscv64"})
    with pytest.raises(ValueError, match="no task definition"):
        FargateImage(CHECK_IMAGE, None)


@pytest.fixture
def arm64_task_definition(aws: Aws) -> str:
    registered = aws.ecs.register_task_definition(**task_definition(cpu_architecture="ARM64"))
    arn: str = registered["taskDefinition"]["taskDefinitionArn"]
    return arn


@pytest.mark.parametrize(
    ("variants", "cpu_architecture"),
    [(("x86_64", "arm64"), "ARM64"), (("x86_64",), "X86_64"), (("arm64",), "ARM64")],
)
def test_a_check_runs_on_arm64_when_the_image_has_that_variant(
    aws: Aws,
    arm64_task_definition: str,
    link: ArchiveLink,
    variants: tuple[str, ...],
    cpu_architecture: str,
) -> None:
    image = FargateImage(
        CHECK_IMAGE,
        aws.task_definition if "x86_64" in variants else None,
        arm64_task_definition if "arm64" in variants else None,
    )
    port = FargateContainerPort(
        settings(aws, default=image), aws.ecs, aws.logs, sleep=lambda _: None
    )
    assert port.preflight("default") == CHECK_IMAGE
    handle = port.start(spec(link))
    [task] = aws.ecs.describe_tasks(cluster=CLUSTER, tasks=[handle.container_id])["tasks"]
    ran = aws.ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])
    assert ran["taskDefinition"]["runtimePlatform"]["cpuArchitecture"] == cpu_architecture
    port.destroy(handle)


def test_preflight_checks_the_task_definition_that_will_run(aws: Aws) -> None:
    """The ARM64 definition runs, so a drifted digest there is refused even when the X86_64
    one is right."""
    drifted = CHECK_IMAGE.replace("c" * 64, "d" * 64)
    registered = aws.ecs.register_task_definition(
        **task_definition(drifted, cpu_architecture="ARM64")
    )
    image = FargateImage(
        CHECK_IMAGE, aws.task_definition, registered["taskDefinition"]["taskDefinitionArn"]
    )
    port = FargateContainerPort(settings(aws, default=image), aws.ecs, aws.logs)
    with pytest.raises(ImageUnresolved):
        port.preflight("default")


# --- throttled launches ----------------------------------------------------------------


def _refuse_launch_once(
    monkeypatch: pytest.MonkeyPatch, aws: Aws, refusal: Exception | dict[str, Any]
) -> None:
    """RunTask refuses the first launch (an error raised, or a response with failures)."""
    real_run_task = aws.ecs.run_task
    calls = []

    def run_task(**kwargs: Any) -> Any:
        calls.append(kwargs)
        if len(calls) > 1:
            return real_run_task(**kwargs)
        if isinstance(refusal, Exception):
            raise refusal
        return refusal

    monkeypatch.setattr(aws.ecs, "run_task", run_task)


@pytest.mark.parametrize(
    "refusal",
    [
        ClientError({"Error": {"Code": "ThrottlingException", "Message": "Slow down"}}, "RunTask"),
        {"tasks": [], "failures": [{"reason": "Capacity is unavailable at this time."}]},
        {"tasks": [], "failures": [{"reason": "RESOURCE:MEMORY"}]},
    ],
    ids=["throttled", "no-capacity", "no-resource"],
)
def test_a_throttled_launch_raises_launch_throttled_and_a_retry_starts_the_check(
    monkeypatch: pytest.MonkeyPatch,
    aws: Aws,
    port: FargateContainerPort,
    link: ArchiveLink,
    refusal: Exception | dict[str, Any],
) -> None:
    _refuse_launch_once(monkeypatch, aws, refusal)
    attempt = spec(link)
    with pytest.raises(LaunchThrottled):
        port.start(attempt)
    # Nothing started, so the state machine's retry of FullStart may launch it.
    handle = port.start(attempt)
    assert handle.container_id.startswith("arn:aws:ecs:")
    port.destroy(handle)


def test_a_launch_failure_that_is_not_capacity_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, aws: Aws, port: FargateContainerPort, link: ArchiveLink
) -> None:
    _refuse_launch_once(monkeypatch, aws, {"tasks": [], "failures": [{"reason": "MISSING"}]})
    attempt = spec(link)
    with pytest.raises(ContainerStartFailed):
        port.start(attempt)
    with pytest.raises(ContainerRefused):
        port.start(attempt)
