"""Each composition root's settings, read once from the environment into typed models.

The variable names are the ones `template.yaml` sets (a test checks every one is read here)
and the ones `forkhorse serve` documents. A missing or malformed variable stops the function
or the server at start with a message naming it, not at the first request that needs it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from forkhorse.domain.limits import (
    FORK_STORAGE,
    MAX_CONCURRENCY,
    QueueLimits,
    default_concurrency,
    queue_for_concurrency,
)

QUEUE_ENV_PREFIX = "FORKHORSE_QUEUE_"
CONCURRENCY_VARIABLE = "FORKHORSE_CONCURRENCY"


class SettingsError(RuntimeError):
    """A setting the environment lacks or gets wrong, named as the environment names it."""


class _Environment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=False)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        try:
            # CloudFormation sets a blank parameter as an empty variable: that is unset.
            values = os.environ if environ is None else environ
            return cls.model_validate({name: value for name, value in values.items() if value})
        except ValidationError as error:
            raise SettingsError(_describe(cls.__name__, error)) from None


def _describe(model: str, error: ValidationError) -> str:
    missing = [_variable(e["loc"]) for e in error.errors() if e["type"] == "missing"]
    invalid = [
        f"{_variable(e['loc'])} ({e['msg']})" for e in error.errors() if e["type"] != "missing"
    ]
    parts = []
    if missing:
        parts.append("missing environment variable " + ", ".join(missing))
    if invalid:
        parts.append("invalid environment variable " + ", ".join(invalid))
    return f"{model}: " + "; ".join(parts)


def _variable(location: tuple[int | str, ...]) -> str:
    """The variable a validation error is about: a field's alias, or a queue limit's."""
    if location[0] == "queue" and len(location) > 1:
        return QUEUE_ENV_PREFIX + str(location[1]).upper()
    return str(location[0])


class AwsSettings(_Environment):
    """Every function's: the single table and the bucket (the template's Globals)."""

    table_name: str = Field(alias="TABLE_NAME")
    bucket_name: str = Field(alias="BUCKET_NAME")


class FargateEnvironment(_Environment):
    """The trusted run steps': where full checks run (parsed by `FargateSettings`)."""

    images: str = Field(alias="FORKHORSE_IMAGES")
    cluster: str = Field(alias="FORKHORSE_CLUSTER")
    subnets: str = Field(alias="FORKHORSE_SUBNETS")
    security_groups: str = Field(alias="FORKHORSE_SECURITY_GROUPS")
    log_group: str = Field(alias="FORKHORSE_CHECK_LOG_GROUP")


class ServiceEnvironment(_Environment):
    """The functions that run the service: the API, git, push, recovery and PromoteRun's
    steps. Only the API and recovery start or sweep PromoteRuns, so only they need its ARN."""

    public_url: str = Field(alias="PUBLIC_URL")
    state_machine_arn: str = Field(alias="STATE_MACHINE_ARN")
    promote_state_machine_arn: str | None = Field(default=None, alias="PROMOTE_STATE_MACHINE_ARN")
    promote_wait_seconds: float = Field(default=20.0, alias="PROMOTE_WAIT_SECONDS", ge=0)


class OwnerPoolEnvironment(_Environment):
    """The Cognito pool owners sign in with; both unset means tokens only."""

    user_pool_id: str | None = Field(default=None, alias="OWNER_USER_POOL_ID")
    client_id: str | None = Field(default=None, alias="OWNER_CLIENT_ID")


class ConsoleEnvironment(_Environment):
    """What the console tells a browser about signing in (public values only)."""

    cognito_domain: str = Field(default="", alias="COGNITO_DOMAIN")
    cognito_client_id: str = Field(default="", alias="COGNITO_CLIENT_ID")


class EventBusEnvironment(_Environment):
    event_bus_name: str = Field(default="default", alias="EVENT_BUS_NAME")


class SigningEnvironment(_Environment):
    """The KMS key that signs evidence: set only on the steps the key policy lets sign
    (finalize, promote write and settle); elsewhere evidence is only read."""

    signing_key: str | None = Field(default=None, alias="FORKHORSE_SIGNING_KEY")


class LogEnvironment(_Environment):
    """The transparency log's. Functions that append name the publisher (without it they
    keep no log); the API and the publisher name the origin, the checkpoints' first line
    and the key name a witness pins; the API names the key whose public half it serves."""

    publisher_function: str | None = Field(default=None, alias="LOG_PUBLISHER_FUNCTION")
    origin: str | None = Field(default=None, alias="LOG_ORIGIN")
    key_id: str | None = Field(default=None, alias="LOG_KEY_ID")


class LocalSettings(_Environment):
    """`forkhorse serve`, `gc` and `image`: their command-line options' defaults."""

    home: str = Field(default=".forkhorse-local", alias="FORKHORSE_HOME")
    port: int = Field(default=8787, alias="FORKHORSE_PORT", ge=0, le=65535)
    public_url: str | None = Field(default=None, alias="FORKHORSE_PUBLIC_URL")
    # Checks (sandboxes and containers) at once; the run queue follows from it.
    concurrency: int = Field(alias="FORKHORSE_CONCURRENCY", ge=1, le=MAX_CONCURRENCY)
    # Each QueueLimits field overridable by a variable named after it, for example
    # FORKHORSE_QUEUE_RUNNING_PER_PROJECT=4; it wins over what the concurrency gives.
    queue: QueueLimits
    # Garbage collection while serving: how often, and how old unreferenced data must be.
    gc_interval_seconds: float = Field(
        default=FORK_STORAGE.collect_every_seconds, alias="FORKHORSE_GC_INTERVAL_SECONDS", gt=0
    )
    gc_grace_seconds: float = Field(
        default=FORK_STORAGE.collect_grace_seconds, alias="FORKHORSE_GC_GRACE_SECONDS", ge=0
    )

    @model_validator(mode="before")
    @classmethod
    def _queue_overrides(cls, values: dict[str, Any]) -> dict[str, Any]:
        concurrency = values.get(CONCURRENCY_VARIABLE) or machine_concurrency()
        overrides = {
            limit.name: values[variable]
            for limit in fields(QueueLimits)
            if (variable := QUEUE_ENV_PREFIX + limit.name.upper()) in values
        }
        try:
            base = queue_for_concurrency(max(1, min(int(concurrency), MAX_CONCURRENCY)))
        except ValueError:
            base = queue_for_concurrency(1)  # the concurrency's own validation names it
        _follow_full_slots(overrides)
        return {
            **values,
            CONCURRENCY_VARIABLE: concurrency,
            "queue": {**asdict(base), **overrides},
        }


def _follow_full_slots(overrides: dict[str, Any]) -> None:
    """Full slots set alone keep the per-project share one below them (at least one)."""
    if "full_slots" in overrides and "full_slots_per_project" not in overrides:
        with contextlib.suppress(ValueError, TypeError):
            overrides["full_slots_per_project"] = max(1, int(overrides["full_slots"]) - 1)


def machine_concurrency() -> int:
    """The default concurrency: this process's cores and the machine's memory."""
    cores = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return default_concurrency(cores, memory)


def require(value: str | None, variable: str, purpose: str) -> str:
    """An optional setting that this call does need."""
    if not value:
        raise SettingsError(f"missing environment variable {variable}: needed to {purpose}")
    return value
