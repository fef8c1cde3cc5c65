"""The composition roots' settings: the template's variables, and a clear stop without them."""

from __future__ import annotations

import os
from typing import Any

import pytest
from forkhorse.domain.limits import (
    CONTAINER,
    GIB,
    MAX_CONCURRENCY,
    QueueLimits,
    default_concurrency,
    queue_for_concurrency,
)
from forkhorse.wiring import settings
from forkhorse.wiring.aws import execution_sweep
from forkhorse.wiring.settings import (
    LocalSettings,
    ServiceEnvironment,
    SettingsError,
    _Environment,
)

from tests.support.aws import load_template

# Read by Powertools itself, not by Forkhorse.
# Read by Powertools itself (service, metrics namespace, log level, tracing), not by settings.
POWERTOOLS_VARIABLES = {
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_LOG_LEVEL",
    "POWERTOOLS_TRACE_DISABLED",
}


def _aliases(models: list[type[_Environment]]) -> set[str]:
    return {str(field.alias) for model in models for field in model.model_fields.values()}


def _aws_models() -> list[type[_Environment]]:
    models = [
        value
        for value in vars(settings).values()
        if isinstance(value, type) and issubclass(value, _Environment)
    ]
    return [model for model in models if model not in (_Environment, LocalSettings)]


def _template_variables() -> dict[str, set[str]]:
    """Each function's environment: the Globals' variables and its own."""
    template = load_template()
    shared = set(template["Globals"]["Function"]["Environment"]["Variables"])
    functions: dict[str, Any] = {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    return {
        name: shared | set(resource["Properties"].get("Environment", {}).get("Variables", {}))
        for name, resource in functions.items()
    }


def test_every_variable_the_template_sets_is_a_setting() -> None:
    read = _aliases(_aws_models())
    functions = _template_variables()
    assert len(functions) > 10
    for name, variables in functions.items():
        assert variables - POWERTOOLS_VARIABLES <= read, name


def test_every_aws_setting_is_set_by_the_template() -> None:
    set_somewhere = set().union(*_template_variables().values())
    assert _aliases(_aws_models()) <= set_somewhere


def test_a_missing_variable_is_named() -> None:
    with pytest.raises(SettingsError, match=r"missing environment variable PUBLIC_URL$") as error:
        ServiceEnvironment.from_environ({"STATE_MACHINE_ARN": "arn:aws:states:::receipt"})
    assert "ServiceEnvironment" in str(error.value)


def test_a_blank_variable_is_missing() -> None:
    with pytest.raises(SettingsError, match="PUBLIC_URL, STATE_MACHINE_ARN"):
        ServiceEnvironment.from_environ({"PUBLIC_URL": "", "STATE_MACHINE_ARN": ""})


def test_a_malformed_variable_is_named() -> None:
    with pytest.raises(SettingsError, match="invalid environment variable FORKHORSE_PORT"):
        LocalSettings.from_environ({"FORKHORSE_PORT": "eighty"})


def test_settings_are_read_from_the_environment() -> None:
    environment = ServiceEnvironment.from_environ(
        {
            "PUBLIC_URL": "https://x.example",
            "STATE_MACHINE_ARN": "arn:r",
            "PROMOTE_WAIT_SECONDS": "3",
        }
    )
    assert environment.promote_wait_seconds == 3.0
    assert environment.promote_state_machine_arn is None


def test_the_sweeper_needs_the_promote_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PUBLIC_URL", "https://x.example")
    monkeypatch.setenv("STATE_MACHINE_ARN", "arn:aws:states:us-east-1:1:stateMachine:Receipt")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("PROMOTE_STATE_MACHINE_ARN", raising=False)
    with pytest.raises(SettingsError, match="PROMOTE_STATE_MACHINE_ARN"):
        execution_sweep()
    monkeypatch.setenv("PROMOTE_STATE_MACHINE_ARN", "arn:aws:states:us-east-1:1:stateMachine:P")
    sweep = execution_sweep()
    assert sweep.promote_execution_arn("p", "x") == "arn:aws:states:us-east-1:1:execution:P:x"


def test_a_queue_limit_is_overridden_and_a_bad_one_named() -> None:
    local = LocalSettings.from_environ({"FORKHORSE_QUEUE_RUNNING_PER_PROJECT": "4"})
    assert local.queue.running_per_project == 4
    with pytest.raises(SettingsError, match="invalid environment variable FORKHORSE_QUEUE_"):
        LocalSettings.from_environ({"FORKHORSE_QUEUE_RUNNING_PER_PROJECT": "many"})


def test_the_concurrency_defaults_to_the_machines_cores_and_memory() -> None:
    local = LocalSettings.from_environ({})
    cores = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert local.concurrency == default_concurrency(cores, memory)
    assert 1 <= local.concurrency <= cores
    assert local.queue == queue_for_concurrency(local.concurrency)


def test_the_default_concurrency_never_oversubscribes_cores_or_memory() -> None:
    assert default_concurrency(cores=8, memory_bytes=64 * GIB) == 8
    assert default_concurrency(cores=8, memory_bytes=3 * CONTAINER.memory_bytes) == 3
    assert default_concurrency(cores=1, memory_bytes=64 * GIB) == 1
    assert default_concurrency(cores=4, memory_bytes=CONTAINER.memory_bytes // 2) == 1
    assert default_concurrency(cores=512, memory_bytes=1024 * GIB) == MAX_CONCURRENCY
    assert queue_for_concurrency(2) == QueueLimits()


def test_the_concurrency_setting_sizes_the_queue_and_a_queue_limit_still_wins() -> None:
    local = LocalSettings.from_environ({"FORKHORSE_CONCURRENCY": "6"})
    assert local.concurrency == 6
    assert (local.queue.check_slots, local.queue.quick_slots, local.queue.full_slots) == (6, 6, 6)
    assert local.queue.running_per_project == 6
    pinned = LocalSettings.from_environ(
        {"FORKHORSE_CONCURRENCY": "6", "FORKHORSE_QUEUE_FULL_SLOTS": "3"}
    )
    assert (pinned.queue.check_slots, pinned.queue.full_slots) == (6, 3)
    # One project's share follows full slots set alone, and can be pinned too.
    assert pinned.queue.full_slots_per_project == 2
    both = LocalSettings.from_environ(
        {"FORKHORSE_QUEUE_FULL_SLOTS": "3", "FORKHORSE_QUEUE_FULL_SLOTS_PER_PROJECT": "3"}
    )
    assert (both.queue.full_slots, both.queue.full_slots_per_project) == (3, 3)


def test_garbage_collection_is_scheduled_from_the_environment() -> None:
    default = LocalSettings.from_environ({})
    assert (default.gc_interval_seconds, default.gc_grace_seconds) == (600, 3600)
    tuned = LocalSettings.from_environ(
        {"FORKHORSE_GC_INTERVAL_SECONDS": "1.5", "FORKHORSE_GC_GRACE_SECONDS": "0"}
    )
    assert (tuned.gc_interval_seconds, tuned.gc_grace_seconds) == (1.5, 0)
    for variable, value in (
        ("FORKHORSE_GC_INTERVAL_SECONDS", "0"),
        ("FORKHORSE_GC_GRACE_SECONDS", "-1"),
        ("FORKHORSE_GC_INTERVAL_SECONDS", "often"),
    ):
        with pytest.raises(SettingsError, match=f"invalid environment variable {variable}"):
            LocalSettings.from_environ({variable: value})


@pytest.mark.parametrize("value", ["0", "-1", "many", str(MAX_CONCURRENCY + 1)])
def test_a_bad_concurrency_is_named(value: str) -> None:
    with pytest.raises(SettingsError, match="invalid environment variable FORKHORSE_CONCURRENCY"):
        LocalSettings.from_environ({"FORKHORSE_CONCURRENCY": value})
