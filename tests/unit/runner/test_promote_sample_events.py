"""Every PromoteRun step's sample event in events/ is a valid input for that step, and the
settle sample carries the exact refusal a caught `PromoteRefused` hands it."""

import json
from pathlib import Path

import pytest
from forkhorse.runner.contracts import PromoteState
from forkhorse.runner.promote_steps import refusal_from_error

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted((ROOT / "events").glob("promote_*.json"))


def test_every_promote_step_has_a_sample() -> None:
    steps = {path.name for path in (ROOT / "functions").glob("promote_*")}
    assert steps == {path.stem for path in SAMPLES}


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.stem)
def test_the_sample_is_a_valid_step_input(path: Path) -> None:
    PromoteState.model_validate(json.loads(path.read_text()))


def test_the_settle_sample_carries_the_exact_409() -> None:
    state = PromoteState.model_validate(
        json.loads((ROOT / "events/promote_settle.json").read_text())
    )
    refusal = refusal_from_error(state.error)
    assert (refusal.status, refusal.error) == (409, "Checks failed before promote.")
