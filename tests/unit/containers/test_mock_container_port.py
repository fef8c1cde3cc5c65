"""The mock ContainerPort: its evidence is always labelled mocked, its contract is the real one."""

from __future__ import annotations

from pathlib import Path

import pytest
from forkhorse.adapters.containers.mock import MOCK_IMAGES, MockContainerPort, MockRun
from forkhorse.ports.containers import (
    CleanupUnconfirmed,
    ContainerRefused,
    ContainerSpec,
    ImageUnresolved,
    require_pinned,
)

REF = MOCK_IMAGES["default"]


def spec(check: str = "test", execution: str = "exec-1", timeout: int = 60) -> ContainerSpec:
    return ContainerSpec("proj", execution, "gen", check, REF, "npm test", timeout, Path("."))


def test_the_mock_is_labelled_mocked() -> None:
    port = MockContainerPort()
    assert (port.platform, port.evidence) == ("mock", "mocked-container-port")


def test_scripted_outcomes() -> None:
    port = MockContainerPort(
        script={"bad": MockRun(exit_code=2, stderr=b"boom"), "lost": MockRun(exit_code=None)}
    )
    outcomes = {}
    for check in ("good", "bad", "lost"):
        handle = port.start(spec(check))
        assert port.poll(handle) == "exited"
        outcomes[check] = port.collect(handle)
        port.destroy(handle)
    assert outcomes["good"].outcome == "passed"
    assert (outcomes["bad"].outcome, outcomes["bad"].stderr.text) == ("failed", "boom")
    assert outcomes["lost"].outcome == "infrastructure-error"
    assert len(port.destroyed) == 3


def test_a_hanging_check_times_out() -> None:
    port = MockContainerPort(script={"test": MockRun(hangs=True)})
    handle = port.start(spec(timeout=1))
    assert port.poll(handle) == "running"
    late = handle.model_copy(update={"deadline": 0.0})
    assert port.poll(late) == "timed-out"
    assert port.collect(late).outcome == "timed-out"


def test_refusals_and_fail_closed_cleanup() -> None:
    port = MockContainerPort(fail_cleanup=True)
    with pytest.raises(ImageUnresolved):
        port.preflight("busybox")
    assert port.preflight("default") == REF
    handle = port.start(spec())
    with pytest.raises(ContainerRefused):
        port.start(spec())
    with pytest.raises(CleanupUnconfirmed):
        port.destroy(handle)
    with pytest.raises(ContainerRefused):
        port.collect(handle)


@pytest.mark.parametrize(
    "reference",
    [
        "busybox",
        "busybox:latest",
        "x@sha256:" + "A" * 64,
        "x@sha256:" + "a" * 63,
        "@sha256:" + "a" * 64,
    ],
)
def test_only_immutable_references_are_accepted(reference: str) -> None:
    with pytest.raises(ImageUnresolved):
        require_pinned(reference)


@pytest.mark.parametrize("execution", ["", "../x", "a" * 37, "a b", "-x"])
def test_execution_ids_are_safe_names(execution: str) -> None:
    with pytest.raises(ValueError, match="execution"):
        spec(execution=execution)
