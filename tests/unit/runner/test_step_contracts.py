"""The step contracts of both state machines: every sample event in events/ is a valid
input of the step its function runs, the JSON they put on the wire is pinned byte for byte
(the state machines and stored executions depend on it), and a bad input is refused with
the field named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forkhorse.domain.checks import FullCheckDef, QuickCheckDef
from forkhorse.domain.run import RunRef
from forkhorse.runner.workflow.contracts import (
    ExecutionInput,
    Finalized,
    FullLaunch,
    FullProgress,
    InvalidStepInput,
    PreparedAbsent,
    PreparedChecks,
    PreparedInvalid,
    QuickDropped,
    StepResult,
    input_model,
    parse_step_input,
    to_wire,
)
from forkhorse.service.promote.contracts import PromoteState, RunReserved
from forkhorse.wiring.handlers import StepHandler
from pydantic import BaseModel

from tests.support.lambda_context import FakeLambdaContext
from tests.support.step_functions import load_handler

ROOT = Path(__file__).resolve().parents[3]
EVENTS = ROOT / "events"
# Samples of a step's input that are named for a variant of it: the function they are for.
VARIANTS = {"run_finalize_infrastructure_error": "run_finalize", "quick_check_js": "quick_check"}
RUN = RunRef(
    project_id="demo",
    review_id="review-1",
    generation="6f1c2f4e-8a4b-4c55-9d0e-3d2b1a0f9e11",
    trigger="review-created",
    commit="0123456789abcdef0123456789abcdef01234567",
)
RUN_JSON = (
    '{"projectId": "demo", "reviewId": "review-1", "generation": '
    '"6f1c2f4e-8a4b-4c55-9d0e-3d2b1a0f9e11", "trigger": "review-created", '
    '"commit": "0123456789abcdef0123456789abcdef01234567"}'
)
QUICK = QuickCheckDef(name="brand", module=".forkhorse/quick/brand.py")
QUICK_JSON = '{"name": "brand", "tier": "quick", "module": ".forkhorse/quick/brand.py"}'
FULL = FullCheckDef(name="unit", image="default", run="npm test")
FULL_JSON = (
    '{"name": "unit", "tier": "full", "image": "default", "run": "npm test", "timeoutSeconds": 600}'
)
DIGEST = "0ff4de39727d11b01410e0adece6ce1a27b3c9d1e5f60718293a4b5c6d7e8f90"


def _is_own_shape(event: dict[str, Any]) -> bool:
    """API Gateway, authorizer and EventBridge events have shapes of their own."""
    return "requestContext" in event or "detail-type" in event


def _step_handler(sample: str) -> StepHandler:
    handler = load_handler(VARIANTS.get(sample, sample))
    assert isinstance(handler, StepHandler), f"functions/{sample} runs no state machine step"
    return handler


def _step_samples() -> list[Path]:
    return [path for path in sorted(EVENTS.glob("*.json")) if not _is_own_shape(_load(path))]


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


@pytest.mark.parametrize("path", _step_samples(), ids=lambda path: path.stem)
def test_every_step_sample_is_a_valid_input_of_its_functions_step(path: Path) -> None:
    model = input_model(_step_handler(path.stem).step)
    parse_step_input(model, _load(path))


@pytest.mark.parametrize("path", _step_samples(), ids=lambda path: path.stem)
def test_a_sample_goes_back_on_the_wire_byte_for_byte(path: Path) -> None:
    """The samples are what the state machines pass: the models keep every key, its
    spelling and its place."""
    event = _load(path)
    model = input_model(_step_handler(path.stem).step)
    assert json.dumps(to_wire(parse_step_input(model, event))) == json.dumps(event)


def test_the_samples_cover_every_step_function() -> None:
    functions = {
        path.name
        for path in (ROOT / "functions").iterdir()
        if (path / "app.py").is_file() and isinstance(load_handler(path.name), StepHandler)
    }
    sampled = {VARIANTS.get(path.stem, path.stem) for path in _step_samples()}
    assert functions == sampled


@pytest.mark.parametrize(
    ("output", "wire"),
    [
        (
            PreparedAbsent(discovery="absent", quick=[], full=[], quick_count=0),
            '{"discovery": "absent", "quick": [], "full": [], "quickCount": 0}',
        ),
        (
            PreparedInvalid(discovery="invalid", message="bad", quick=[], full=[], quick_count=0),
            '{"discovery": "invalid", "message": "bad", "quick": [], "full": [], "quickCount": 0}',
        ),
        (
            PreparedChecks(discovery="checks", tree="t", quick=[QUICK], full=[FULL], quick_count=1),
            f'{{"discovery": "checks", "tree": "t", "quick": [{QUICK_JSON}], '
            f'"full": [{FULL_JSON}], "quickCount": 1}}',
        ),
        (
            QuickDropped(run=RUN, name="brand", evidence=DIGEST),
            f'{{"run": {RUN_JSON}, "name": "brand", "evidence": "{DIGEST}"}}',
        ),
        (
            StepResult(name="brand", outcome="failed", passed=False, result=DIGEST),
            f'{{"name": "brand", "outcome": "failed", "passed": false, "result": "{DIGEST}"}}',
        ),
        (
            FullProgress(
                run=RUN,
                check=FULL,
                poll_seconds=1,
                done=True,
                name="unit",
                outcome="passed",
                passed=True,
                result=DIGEST,
            ),
            f'{{"run": {RUN_JSON}, "check": {FULL_JSON}, "pollSeconds": 1, "done": true, '
            f'"name": "unit", "outcome": "passed", "passed": true, "result": "{DIGEST}"}}',
        ),
        (
            FullProgress(
                run=RUN,
                check=FULL,
                done=True,
                name="unit",
                outcome="timed-out",
                passed=False,
                result=DIGEST,
            ),
            f'{{"run": {RUN_JSON}, "check": {FULL_JSON}, "done": true, "name": "unit", '
            f'"outcome": "timed-out", "passed": false, "result": "{DIGEST}"}}',
        ),
        (
            Finalized(attached=False, discovery="absent", discarded=True),
            '{"attached": false, "discovery": "absent", "discarded": true}',
        ),
        (
            Finalized(attached=False, reason="stale generation"),
            '{"attached": false, "reason": "stale generation"}',
        ),
        (
            Finalized(attached=True, digest=DIGEST, status="passed"),
            f'{{"attached": true, "digest": "{DIGEST}", "status": "passed"}}',
        ),
        (
            Finalized(attached=False, status="infrastructure-error"),
            '{"attached": false, "status": "infrastructure-error"}',
        ),
        (
            RunReserved(project_id="p", promotion_id="x", token=7, required=False),
            '{"projectId": "p", "promotionId": "x", "token": 7, "required": false, "run": null}',
        ),
        (
            PromoteState(project_id="p", promotion_id="x", token=7, run=None, outcome="done"),
            '{"projectId": "p", "promotionId": "x", "token": 7, "outcome": "done"}',
        ),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseModel) else "",
)
def test_step_outputs_keep_their_wire_form(output: BaseModel, wire: str) -> None:
    assert json.dumps(to_wire(output)) == wire


def test_a_nested_execution_input_keeps_step_functions_own_key() -> None:
    nested = {"run": json.loads(RUN_JSON), "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID": "arn:x"}
    parsed = parse_step_input(ExecutionInput, nested)
    assert parsed.started_by == "arn:x"
    assert to_wire(parsed) == nested


def test_a_missing_field_is_named() -> None:
    event = _load(EVENTS / "run_full_start.json")
    del event["check"]["image"]
    with pytest.raises(InvalidStepInput, match=r"FullLaunch input: check\.image: Field required"):
        parse_step_input(FullLaunch, event)


def test_a_wrong_type_is_named() -> None:
    event = _load(EVENTS / "run_full_start.json")
    event["check"]["timeoutSeconds"] = "600"
    with pytest.raises(InvalidStepInput, match=r"check\.timeoutSeconds: Input should be a valid"):
        parse_step_input(FullLaunch, event)


def test_an_unknown_field_is_named() -> None:
    event = _load(EVENTS / "promote_write.json") | {"leaseSecond": 5}
    with pytest.raises(InvalidStepInput, match=r"leaseSecond: Extra inputs are not permitted"):
        parse_step_input(PromoteState, event)


def test_a_handler_refuses_a_bad_event_before_it_builds_any_port() -> None:
    """No AWS settings here: the refusal comes from the contract, not from wiring."""
    event = _load(EVENTS / "run_prepare.json")
    del event["run"]["commit"]
    missing = r"ExecutionInput input: run\.commit: Field required"
    with pytest.raises(InvalidStepInput, match=missing):
        _step_handler("run_prepare")(event, FakeLambdaContext())
