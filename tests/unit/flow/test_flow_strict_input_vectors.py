"""Replay `generated-producer/strict-input-vectors.json` (issue 30): the reference's answers
where it has one. The parent generation behind an edited envelope is preserved exactly as the
reference preserves it; R-IDs written with non-ASCII digits are the one allowed divergence
(DIVERGENCES.md, D-P3): Forkhorse drops such a mention, and nothing else, from the item.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.findings import validate_container
from forkhorse.flow.history import history_path, read_generations
from forkhorse.flow.producer import attach
from forkhorse.flow.prose import ParseScope, parse_findings
from forkhorse.flow.rules import R_ID_PATTERN

from tests.unit.flow.flow_factories import BASE, load_vectors

VECTORS = load_vectors("generated-producer/strict-input-vectors.json")["vectors"]
R_IDS = [v for v in VECTORS if v["kind"] == "r-ids"]
PARENTS = [v for v in VECTORS if v["kind"] == "bad-envelope-parent"]


def ascii_r_ids_only(container: dict[str, Any]) -> dict[str, Any]:
    """The reference's container with every non-ASCII-digit R-ID left out (D-P3)."""
    items = [
        {**item, "rIds": [r for r in item["rIds"] if R_ID_PATTERN.fullmatch(r)]}
        for item in container["items"]
    ]
    return {**container, "items": items}


@pytest.mark.parametrize("vector", R_IDS, ids=[v["name"] for v in R_IDS])
def test_a_non_ascii_digit_r_id_is_dropped_and_the_round_survives(vector: dict[str, Any]) -> None:
    reference = vector["expected"]
    assert reference is not None
    assert vector["reference_accepts"] is True
    produced = parse_findings(vector["text"], ParseScope(**vector["scope"]))
    assert produced is not None
    assert produced == ascii_r_ids_only(reference)
    validate_container(produced)
    assert produced != reference  # the vector holds a real divergence
    receipt = {"type": "impl_review", "mode": "codex", "verdict": "NEEDS_WORK"}
    violation = validate_receipt({**receipt, "findings": reference}).violation
    assert violation is not None
    assert violation.rule == "item.rIds-grammar"


@pytest.mark.parametrize("vector", PARENTS, ids=[v["name"] for v in PARENTS])
def test_a_parent_with_an_edited_envelope_is_preserved(
    tmp_path: Path, vector: dict[str, Any]
) -> None:
    path = tmp_path / "impl.json"
    for index, (step, expected) in enumerate(zip(vector["steps"], vector["expected"], strict=True)):
        receipt = {"type": "impl_review", "id": "fn-1.1", "mode": "codex", "verdict": "NEEDS_WORK"}
        attach(receipt, step["text"], path, head_sha=step["head"], base_sha=BASE)
        written = json.loads(path.read_text())
        assert written["findings"] == expected["findings"]
        if index == 0:
            written["verdict"] = vector["edited_verdict"]
            path.write_text(json.dumps(written))
            parent = written
        else:
            assert expected["parent_preserved"] is True
            source = parent["findings"]["sourceReceiptId"]
            assert json.loads(history_path(path, source).read_text()) == parent
    sources = sorted(
        g.receipt["findings"]["sourceReceiptId"]  # type: ignore[index]
        for g in read_generations(path)
    )
    assert sources == vector["generations"]
