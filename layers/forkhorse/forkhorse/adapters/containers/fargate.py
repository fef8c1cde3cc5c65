"""The AWS ContainerPort: one ECS RunTask on Fargate per full check, in isolated subnets.

The task definition (declared in template.yaml, the image digest a template parameter) has two
containers sharing a `workspace` volume:
- `fetch`, a small trusted init container: it fetches the snapshot archive through the
  180-second presigned URL and unpacks it into /workspace, then exits;
- `check`, the owner's image by digest: it runs `sh -c "<run>"` in /workspace once `fetch`
  succeeded, with a read-only root filesystem.

A stopped task is not a pass: DescribeTasks is read for EVERY container of the task
definition, and each must report an exit code explicitly. StopTask cleans up, confirmed.
Logs come from CloudWatch Logs (the awslogs driver merges stdout and stderr into one stream,
reported as stdout), bounded like every other log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from forkhorse.adapters.containers.common import (
    CHECK_LABEL,
    EXECUTION_LABEL,
    MANAGED_LABEL,
    Attempts,
    labels_for,
    result_for,
)
from forkhorse.domain.logs import EMPTY_LOG, BoundedLog, LogSample
from forkhorse.domain.receipts import Evidence
from forkhorse.ports.containers import (
    CleanupUnconfirmed,
    ContainerHandle,
    ContainerRefused,
    ContainerResult,
    ContainerSpec,
    ContainerStartFailed,
    ImageUnresolved,
    LaunchThrottled,
    PollState,
    require_pinned,
)
from forkhorse.ports.git import ARCHIVE_URL_TTL_SECONDS, ArchiveLink

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_logs import CloudWatchLogsClient

TIMEOUT_REASON = "Forkhorse: the check timed out."
CLEANUP_REASON = "Forkhorse: cleanup after the check."
ORPHAN_REASON = "Forkhorse: orphan of an execution that is no longer running."
SNAPSHOT_URL_VARIABLE = "SNAPSHOT_URL"
CHECK_UID = 1000
# The trusted init command: fetch the archive (the URL is the only credential, valid 180 s),
# unpack it for the check's unprivileged user. Node's fetch: the default image has no curl.
INIT_COMMAND = (
    "sh",
    "-c",
    'set -e; node -e "fetch(process.env.SNAPSHOT_URL).then(async r => {'
    " if (!r.ok) { console.error('snapshot: HTTP ' + r.status); process.exit(2); }"
    " require('fs').writeFileSync('/tmp/snapshot.tar', Buffer.from(await r.arrayBuffer()));"
    " }).catch(() => { console.error('snapshot: fetch failed'); process.exit(3); })\";"
    " tar -x --no-same-owner -f /tmp/snapshot.tar -C /workspace;"
    f" chown -R {CHECK_UID}:{CHECK_UID} /workspace",
)
_DESCRIBE_BATCH = 100
_MAX_LOG_PAGES = 64
# RunTask errors that mean "not now": the state machine retries the launch with backoff.
THROTTLING_CODES = frozenset({"ThrottlingException", "TooManyRequestsException"})
# RunTask failure reasons that mean no capacity right now (not a broken task definition).
_CAPACITY_REASONS = ("Capacity is unavailable", "RESOURCE:")


def _capacity_short(failure: Mapping[str, Any]) -> bool:
    return str(failure.get("reason", "")).startswith(_CAPACITY_REASONS)


# FORKHORSE_IMAGES's architectures, each with the key of the task definition for it.
_TASK_DEFINITION_KEYS = {"x86_64": "taskDefinition", "arm64": "arm64TaskDefinition"}


@dataclass(frozen=True)
class FargateImage:
    """A deployment image: its pinned reference and a task definition (template.yaml: the
    same task on another CPU architecture) for each architecture the image has a variant for.
    """

    reference: str
    x86_64_task_definition: str | None
    arm64_task_definition: str | None = None

    def __post_init__(self) -> None:
        if self.x86_64_task_definition is None and self.arm64_task_definition is None:
            raise ValueError(f"{self.reference} has no task definition for any architecture")

    @property
    def task_definition(self) -> str:
        """ARM64's when the image has that variant (Graviton: about 20% less per vCPU-hour
        for the same task), X86_64's otherwise."""
        chosen = self.arm64_task_definition or self.x86_64_task_definition
        assert chosen is not None  # __post_init__
        return chosen

    @classmethod
    def from_entry(cls, entry: Mapping[str, str]) -> FargateImage:
        """One FORKHORSE_IMAGES entry: `architectures` ("arm64,x86_64"; x86_64 when absent)
        says which of its task definitions apply."""
        architectures = set(entry.get("architectures", "x86_64").split(","))
        if unknown := architectures - set(_TASK_DEFINITION_KEYS):
            raise ValueError(f"unknown image architectures: {sorted(unknown)}")

        def variant(architecture: str) -> str | None:
            key = _TASK_DEFINITION_KEYS[architecture]
            return entry[key] if architecture in architectures else None

        return cls(entry["reference"], variant("x86_64"), variant("arm64"))


@dataclass(frozen=True)
class FargateSettings:
    cluster: str
    subnets: tuple[str, ...]
    security_groups: tuple[str, ...]
    images: Mapping[str, FargateImage]
    log_group: str
    log_stream_prefix: str = "forkhorse"
    init_container: str = "fetch"
    check_container: str = "check"
    stop_confirm_seconds: float = 60.0

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> FargateSettings:
        """The template's function environment; `FORKHORSE_IMAGES` is JSON:
        `{"default": {"reference": "...@sha256:...", "architectures": "arm64,x86_64",
        "taskDefinition": "arn:...", "arm64TaskDefinition": "arn:..."}}`."""
        images = {
            name: FargateImage.from_entry(entry)
            for name, entry in json.loads(env["FORKHORSE_IMAGES"]).items()
        }
        return cls(
            cluster=env["FORKHORSE_CLUSTER"],
            subnets=tuple(env["FORKHORSE_SUBNETS"].split(",")),
            security_groups=tuple(env["FORKHORSE_SECURITY_GROUPS"].split(",")),
            images=images,
            log_group=env["FORKHORSE_CHECK_LOG_GROUP"],
        )


@dataclass
class FargateContainerPort:
    settings: FargateSettings
    ecs: ECSClient
    logs: CloudWatchLogsClient
    sleep: Callable[[float], None] = time.sleep
    platform: str = "fargate"
    evidence: Evidence = "container"
    _attempts: Attempts = field(default_factory=Attempts)

    # --- preflight ---------------------------------------------------------------------

    def preflight(self, image_name: str) -> str:
        image = self.settings.images.get(image_name)
        if image is None:
            raise ImageUnresolved()
        reference = require_pinned(image.reference)
        containers = self._container_definitions(image.task_definition)
        check = containers.get(self.settings.check_container, {})
        init = containers.get(self.settings.init_container, {})
        # The task definition must really run this digest, and a pinned trusted init.
        if check.get("image") != reference:
            raise ImageUnresolved()
        require_pinned(str(init.get("image", "")))
        return reference

    def _container_definitions(self, task_definition: str) -> dict[str, dict[str, Any]]:
        try:
            described = self.ecs.describe_task_definition(taskDefinition=task_definition)
        except ClientError as error:
            raise ImageUnresolved() from error
        definitions = described["taskDefinition"].get("containerDefinitions", [])
        return {str(item.get("name")): dict(item) for item in definitions}

    # --- start -------------------------------------------------------------------------

    def start(self, spec: ContainerSpec) -> ContainerHandle:
        link = spec.source
        if not isinstance(link, ArchiveLink) or link.expires_in_seconds > ARCHIVE_URL_TTL_SECONDS:
            raise ContainerStartFailed("The snapshot is not a 180-second archive link.")
        image = self._image_for(spec.image_ref)
        self._refuse_existing(spec)
        self._attempts.claim(spec.execution, spec.check)
        try:
            response = self._run_task(spec, image, link)
        except LaunchThrottled:
            self._attempts.release(spec.execution, spec.check)
            raise
        tasks = response.get("tasks", [])
        if response.get("failures") or len(tasks) != 1:
            raise ContainerStartFailed()
        started_at = time.time()
        return ContainerHandle(
            platform=self.platform,
            container_id=tasks[0]["taskArn"],
            project=spec.project,
            execution=spec.execution,
            generation=spec.generation,
            check=spec.check,
            image_ref=spec.image_ref,
            started_at=started_at,
            deadline=started_at + spec.timeout_seconds,
        )

    def _run_task(
        self, spec: ContainerSpec, image: FargateImage, link: ArchiveLink
    ) -> Mapping[str, Any]:
        """RunTask; a throttled call or a launch refused for capacity raises LaunchThrottled."""
        try:
            response: Mapping[str, Any] = self.ecs.run_task(
                cluster=self.settings.cluster,
                taskDefinition=image.task_definition,
                launchType="FARGATE",
                count=1,
                startedBy=spec.execution,
                networkConfiguration={
                    "awsvpcConfiguration": {
                        "subnets": list(self.settings.subnets),
                        "securityGroups": list(self.settings.security_groups),
                        "assignPublicIp": "DISABLED",
                    }
                },
                overrides={"containerOverrides": self._overrides(spec, link)},
                tags=[{"key": key, "value": value} for key, value in labels_for(spec).items()],
                enableExecuteCommand=False,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in THROTTLING_CODES:
                raise LaunchThrottled() from error
            raise
        failures = response.get("failures", [])
        if failures and all(_capacity_short(failure) for failure in failures):
            raise LaunchThrottled()
        return response

    def _image_for(self, reference: str) -> FargateImage:
        require_pinned(reference)
        for image in self.settings.images.values():
            if image.reference == reference:
                return image
        raise ImageUnresolved()

    def _overrides(self, spec: ContainerSpec, link: ArchiveLink) -> list[Any]:
        return [
            {
                "name": self.settings.init_container,
                "command": list(INIT_COMMAND),
                "environment": [{"name": SNAPSHOT_URL_VARIABLE, "value": link.url}],
            },
            {"name": self.settings.check_container, "command": ["sh", "-c", spec.run]},
        ]

    def _refuse_existing(self, spec: ContainerSpec) -> None:
        """Any task of this execution and check, running or stopped, means reuse: refuse."""
        for status in ("RUNNING", "STOPPED"):
            arns = self._task_arns(startedBy=spec.execution, desiredStatus=status)
            for task in self._describe(arns):
                if _tags(task).get(CHECK_LABEL) == spec.check:
                    raise ContainerRefused()

    # --- poll and collect ----------------------------------------------------------------

    def poll(self, handle: ContainerHandle) -> PollState:
        self._attempts.require_live(handle)
        task = self._task(handle)
        if task is None or task.get("lastStatus") == "STOPPED":
            return "timed-out" if _timed_out(task) else "exited"
        if time.time() < handle.deadline:
            return "running"
        self.ecs.stop_task(
            cluster=self.settings.cluster, task=handle.container_id, reason=TIMEOUT_REASON
        )
        return "timed-out"

    def wait(self, handle: ContainerHandle, seconds: float) -> bool:
        """Step Functions waits between polls; a local caller simply sleeps."""
        time.sleep(seconds)
        return False

    def collect(self, handle: ContainerHandle) -> ContainerResult:
        self._attempts.require_live(handle)
        task = self._task(handle)
        if task is None:
            return self._result(handle, None, None, "The task could not be found.")
        if task.get("lastStatus") != "STOPPED":
            if time.time() < handle.deadline:
                raise ContainerStartFailed("The task is still running.")
            # Stopped at its deadline: ECS takes a while to stop a task; wait (bounded).
            self._stop_confirmed(handle.container_id, TIMEOUT_REASON)
            task = self._task(handle)
            if task is None:
                return self._result(handle, None, None, "The task could not be found.")
        exit_code, broken = self._exit_code(task)
        return self._result(handle, task, exit_code, broken)

    def _exit_code(self, task: Mapping[str, Any]) -> tuple[int | None, str | None]:
        """Every container of the task definition must report its exit code explicitly."""
        expected = self._container_definitions(task["taskDefinitionArn"])
        reported = {item.get("name"): item for item in task.get("containers", [])}
        codes: dict[str, int] = {}
        for name in expected:
            code = reported.get(name, {}).get("exitCode")
            if not isinstance(code, int):
                return None, f"The {name} container stopped without an exit code."
            codes[name] = code
        if codes.get(self.settings.init_container, 0) != 0:
            return None, "The snapshot could not be fetched into the container."
        if self.settings.check_container not in codes:
            return None, "The task has no check container."
        return codes[self.settings.check_container], None

    def _result(
        self,
        handle: ContainerHandle,
        task: Mapping[str, Any] | None,
        exit_code: int | None,
        broken: str | None,
    ) -> ContainerResult:
        return result_for(
            exit_code=exit_code,
            timed_out=_timed_out(task),
            duration_ms=_duration_ms(task, handle),
            stdout=self._log(handle),
            stderr=EMPTY_LOG,
            timeout_seconds=handle.deadline - handle.started_at,
            broken=broken,
        )

    def _log(self, handle: ContainerHandle) -> BoundedLog:
        """The check container's awslogs stream, read from its head, bounded."""
        task_id = handle.container_id.rsplit("/", 1)[-1]
        stream = f"{self.settings.log_stream_prefix}/{self.settings.check_container}/{task_id}"
        sample = LogSample()
        for message in self._log_messages(stream):
            sample.feed(message.encode("utf-8", "replace") + b"\n")
        return sample.bounded()

    def _log_messages(self, stream: str) -> Iterator[str]:
        token: str | None = None
        for _ in range(_MAX_LOG_PAGES):
            request: dict[str, Any] = {
                "logGroupName": self.settings.log_group,
                "logStreamName": stream,
                "startFromHead": True,
            }
            if token:
                request["nextToken"] = token
            try:
                page = self.logs.get_log_events(**request)
            except self.logs.exceptions.ResourceNotFoundException:
                return
            yield from (event.get("message", "") for event in page.get("events", []))
            if not page.get("events") or page.get("nextForwardToken") in (None, token):
                return
            token = page["nextForwardToken"]

    # --- destroy and orphans -------------------------------------------------------------

    def destroy(self, handle: ContainerHandle) -> None:
        self._attempts.mark_destroyed(handle)
        self._stop_confirmed(handle.container_id, CLEANUP_REASON)

    def _stop_confirmed(self, task_arn: str, reason: str) -> None:
        """StopTask, then wait (bounded) until DescribeTasks says STOPPED or forgets the task."""
        waited = 0.0
        while True:
            tasks = self._describe([task_arn])
            if not tasks or tasks[0].get("lastStatus") == "STOPPED":
                return
            if tasks[0].get("desiredStatus") != "STOPPED":
                self._stop(task_arn, reason)
            if waited >= self.settings.stop_confirm_seconds:
                raise CleanupUnconfirmed()
            self.sleep(2.0)
            waited += 2.0

    def _stop(self, task_arn: str, reason: str) -> None:
        try:
            self.ecs.stop_task(cluster=self.settings.cluster, task=task_arn, reason=reason)
        except ClientError as error:
            raise CleanupUnconfirmed() from error

    def cleanup_orphans(self, live_executions: frozenset[str]) -> list[str]:
        stopped = []
        for task in self._describe(self._task_arns(desiredStatus="RUNNING")):
            tags = _tags(task)
            if tags.get(MANAGED_LABEL) == "true" and tags.get(EXECUTION_LABEL) not in (
                live_executions
            ):
                self._stop_confirmed(task["taskArn"], ORPHAN_REASON)
                stopped.append(task["taskArn"])
        return stopped

    # --- ECS reads -----------------------------------------------------------------------

    def _task(self, handle: ContainerHandle) -> dict[str, Any] | None:
        tasks = self._describe([handle.container_id])
        return tasks[0] if tasks else None

    def _task_arns(self, **filters: str) -> list[str]:
        paginator = self.ecs.get_paginator("list_tasks")
        pages = paginator.paginate(cluster=self.settings.cluster, **filters)  # type: ignore[arg-type]
        return [arn for page in pages for arn in page.get("taskArns", [])]

    def _describe(self, arns: list[str]) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = []
        for start in range(0, len(arns), _DESCRIBE_BATCH):
            described = self.ecs.describe_tasks(
                cluster=self.settings.cluster,
                tasks=arns[start : start + _DESCRIBE_BATCH],
                include=["TAGS"],
            )
            tasks.extend(dict(task) for task in described.get("tasks", []))
        return tasks


def _tags(task: Mapping[str, Any]) -> dict[str, str]:
    return {tag["key"]: tag["value"] for tag in task.get("tags", [])}


def _timed_out(task: Mapping[str, Any] | None) -> bool:
    return task is not None and task.get("stoppedReason") == TIMEOUT_REASON


def _duration_ms(task: Mapping[str, Any] | None, handle: ContainerHandle) -> int:
    started, stopped = (task or {}).get("startedAt"), (task or {}).get("stoppedAt")
    if isinstance(started, datetime) and isinstance(stopped, datetime):
        return round((stopped - started).total_seconds() * 1000)
    return round((time.time() - handle.started_at) * 1000)
