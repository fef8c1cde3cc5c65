"""The settle sample carries the exact refusal a caught `PromoteRefused` hands it (every
sample's validity is test_step_contracts')."""

import json
from pathlib import Path

from forkhorse.service.promote.contracts import PromoteState
from forkhorse.service.promote.steps import refusal_from_error

ROOT = Path(__file__).resolve().parents[3]


def test_the_settle_sample_carries_the_exact_409() -> None:
    state = PromoteState.model_validate(
        json.loads((ROOT / "events/promote_settle.json").read_text())
    )
    refusal = refusal_from_error(state.error)
    assert (refusal.kind, refusal.error) == ("conflict", "Checks failed before promote.")
