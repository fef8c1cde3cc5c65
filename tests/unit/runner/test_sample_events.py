"""Every runner step's sample event in events/ is a valid input for that step."""

import json
from pathlib import Path

import pytest
from forkhorse.domain.checks import parse_checks
from forkhorse.domain.run import RunRef
from forkhorse.ports.containers import ContainerHandle

EVENTS = Path(__file__).resolve().parents[3] / "events"
STEP_EVENTS = [*sorted(EVENTS.glob("run_*.json")), *sorted(EVENTS.glob("quick_check*.json"))]


def test_every_step_has_a_sample() -> None:
    functions = Path(__file__).resolve().parents[3] / "functions"
    steps = {path.name.removeprefix("run_") for path in functions.glob("run_*")} - {"recovery"}
    samples = {path.stem.removeprefix("run_") for path in EVENTS.glob("run_*.json")}
    assert steps <= {sample.split("_infrastructure")[0] for sample in samples}


@pytest.mark.parametrize("path", STEP_EVENTS, ids=lambda path: path.stem)
def test_the_sample_is_a_valid_step_input(path: Path) -> None:
    event = json.loads(path.read_text())
    RunRef.model_validate(event["run"])
    if "check" in event:
        parse_checks(json.dumps([event["check"]]))
    if "handle" in event:
        ContainerHandle.model_validate(event["handle"])
    for definition in event.get("prepared", {}).get("quick", []) + event.get("prepared", {}).get(
        "full", []
    ):
        parse_checks(json.dumps([definition]))
