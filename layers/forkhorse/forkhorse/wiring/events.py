"""EventBridge events, typed at the edge: a handler hands use cases a validated detail,
never the raw envelope."""

from __future__ import annotations

import logging
from typing import Any

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forkhorse.ports.containers import ContainerEnded
from forkhorse.ports.events import PUSH_EVENT, PushDetail
from forkhorse.ports.orchestrator import ExecutionEnded

log = logging.getLogger(__name__)

EXECUTION_STATUS_CHANGE = "Step Functions Execution Status Change"
TASK_STATE_CHANGE = "ECS Task State Change"


class PushEnvelope(EventBridgeModel):
    detail: PushDetail


class ExecutionChangeEnvelope(EventBridgeModel):
    detail: ExecutionEnded


class TaskState(BaseModel):
    """The part of ECS's task state change FullStopped reads."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    task_arn: str = Field(alias="taskArn")
    last_status: str = Field(alias="lastStatus")
    started_by: str | None = Field(default=None, alias="startedBy")


class TaskStateEnvelope(EventBridgeModel):
    detail: TaskState


def _envelope[E: EventBridgeModel](model: type[E], event: dict[str, Any], kind: str) -> E | None:
    """The event in its envelope; None (logged) when it is not one."""
    try:
        return model.model_validate(event)
    except ValidationError as invalid:
        log.warning("ignored a malformed %s event: %s", kind, invalid.errors()[:3])
        return None


def push_detail(event: dict[str, Any]) -> PushDetail | None:
    """The push the event reports; None (logged) for anything but a well-formed push."""
    envelope = _envelope(PushEnvelope, event, PUSH_EVENT)
    if envelope is None:
        return None
    if envelope.detail_type != PUSH_EVENT:
        log.warning("ignored a %s event on the push rule", envelope.detail_type)
        return None
    return envelope.detail


def execution_ended(event: dict[str, Any]) -> ExecutionEnded | None:
    """The execution status change the event reports; None for the scheduled sweep."""
    if event.get("detail-type") != EXECUTION_STATUS_CHANGE:
        return None
    return ExecutionChangeEnvelope.model_validate(event).detail


def container_ended(event: dict[str, Any]) -> ContainerEnded | None:
    """The check task that stopped; None (logged) for any other task state change."""
    envelope = _envelope(TaskStateEnvelope, event, TASK_STATE_CHANGE)
    if envelope is None:
        return None
    task = envelope.detail
    if envelope.detail_type != TASK_STATE_CHANGE or task.last_status != "STOPPED":
        return None
    if task.started_by is None:
        return None  # not started for an execution: never a full check's task
    return ContainerEnded(execution=task.started_by, container_id=task.task_arn)
