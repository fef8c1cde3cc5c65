"""`forkhorse qa receipt`: stamping head, branch and counts; the verdict projection; carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.qa_receipt import PROJECTION, QaReceiptError, stamp

from tests.unit.flow.flow_factories import RunCli, git

SPEC = "fn-53"
LIVE_PASS = {"id": "S1", "rids": ["R1"], "outcome": "PASS", "run": "live", "evidence": ["s1.png"]}
LIVE_FAIL = {"id": "S2", "rids": ["R2"], "outcome": "FAIL", "run": "live", "evidence": []}


def draft(outcome: str = "SHIP", **extra: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"qa_outcome": outcome, "scenarios": [LIVE_PASS, LIVE_FAIL]}
    value.update(extra)
    return value


def stamped(value: dict[str, Any], prior: dict[str, Any] | None = None, **kw: Any) -> Any:
    args = {"spec_id": SPEC, "head_sha": "b" * 40, "branch": "feature", "prior": prior}
    args.update(kw)
    return stamp(value, timestamp="2026-12-01T00:00:00Z", **args)


@pytest.mark.parametrize(("outcome", "verdict"), [(k, v[0]) for k, v in PROJECTION.items()])
def test_every_qa_outcome_projects_to_a_workflow_verdict(outcome: str, verdict: str) -> None:
    reason = PROJECTION[outcome][1]
    receipt = stamped(draft(outcome, **({reason: "why"} if reason else {})))
    assert (receipt["type"], receipt["id"], receipt["verdict"]) == ("qa_verdict", SPEC, verdict)
    assert receipt["qa_outcome"] == outcome
    assert validate_receipt(receipt).valid


def test_reason_fields_belong_to_their_outcome() -> None:
    with pytest.raises(QaReceiptError, match="blocked_reason"):
        stamped(draft("BLOCKED"))
    with pytest.raises(QaReceiptError, match="na_reason"):
        stamped(draft("SHIP", na_reason="not here"))
    with pytest.raises(QaReceiptError, match="qa_outcome"):
        stamped(draft("PASS"))


def test_head_branch_counts_and_coverage_are_stamped() -> None:
    receipt = stamped(draft())
    assert (receipt["head_sha"], receipt["branch"]) == ("b" * 40, "feature")
    assert receipt["counts"] == {
        "scenarios": 2,
        "live": 2,
        "carried": 0,
        "pass": 1,
        "fail": 1,
        "blocked": 0,
    }
    assert receipt["rid_coverage"] == {
        "covered": 2,
        "total": 2,
        "rids": [{"id": "R1", "coverage": "live"}, {"id": "R2", "coverage": "live"}],
    }


def test_a_carried_row_copies_outcome_rids_evidence_and_the_original_head() -> None:
    prior = stamped(draft("NEEDS_WORK"), head_sha="a" * 40)
    receipt = stamped(draft(scenarios=[{"id": "S1", "run": "carried"}, LIVE_FAIL]), prior)
    carried = receipt["scenarios"][0]
    assert carried == {
        "id": "S1",
        "run": "carried",
        "outcome": "PASS",
        "rids": ["R1"],
        "evidence": ["s1.png"],
        "head_sha": "a" * 40,
    }
    assert receipt["rid_coverage"]["rids"] == [
        {"id": "R1", "coverage": "carried"},
        {"id": "R2", "coverage": "live"},
    ]
    assert receipt["counts"]["carried"] == 1
    assert validate_receipt(receipt).valid
    # Carried again, it still names the head where it was really driven.
    again = stamped(draft(scenarios=[{"id": "S1", "run": "carried"}]), receipt, head_sha="c" * 40)
    assert again["scenarios"][0]["head_sha"] == "a" * 40


@pytest.mark.parametrize(
    ("prior_kw", "scenario", "reason"),
    [
        ({"spec_id": "fn-54"}, "S1", "another spec"),
        ({"branch": "other"}, "S1", "another branch"),
        ({}, "S2", "did not pass"),
        ({}, "S9", "absent"),
    ],
)
def test_a_carry_is_refused_from_another_spec_branch_or_a_failed_scenario(
    prior_kw: dict[str, str], scenario: str, reason: str
) -> None:
    prior = stamped(draft("NEEDS_WORK"), **prior_kw)
    with pytest.raises(QaReceiptError, match=reason):
        stamped(draft(scenarios=[{"id": scenario, "run": "carried"}]), prior)


def test_carries_need_a_prior_and_only_the_two_keys() -> None:
    with pytest.raises(QaReceiptError, match="no prior"):
        stamped(draft(scenarios=[{"id": "S1", "run": "carried"}]))
    prior = stamped(draft())
    with pytest.raises(QaReceiptError, match="copies the rest"):
        stamped(draft(scenarios=[{"id": "S1", "run": "carried", "outcome": "PASS"}]), prior)


def test_the_scenario_count_is_bounded() -> None:
    rows = [dict(LIVE_PASS, id=f"S{n}") for n in range(FLOW_PRODUCER.qa_scenarios)]
    assert stamped(draft(scenarios=rows))["counts"]["scenarios"] == FLOW_PRODUCER.qa_scenarios
    with pytest.raises(QaReceiptError, match="more than"):
        stamped(draft(scenarios=[*rows, dict(LIVE_PASS, id="S-extra")]))


def test_cli_writes_the_receipt_at_the_spec_path_and_carries_from_it(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "draft.json").write_text(json.dumps(draft("NEEDS_WORK")))
    assert run_cli("qa", "receipt", "--json", "--spec", SPEC, "--input", "draft.json") == 0
    payload = json.loads(capsys.readouterr().out)
    path = repo / ".flow" / "review-receipts" / f"qa-{SPEC}.json"
    assert payload["receipt"] == path.relative_to(repo).as_posix()
    first = json.loads(path.read_text())
    assert first["head_sha"] == git(repo, "rev-parse", "HEAD")
    assert first["branch"] == "main"

    git(repo, "commit", "-q", "--allow-empty", "-m", "fix")
    carry = draft(scenarios=[{"id": "S1", "run": "carried"}, dict(LIVE_FAIL, outcome="PASS")])
    (repo / "draft.json").write_text(json.dumps(carry))
    assert run_cli("qa", "receipt", "--spec", SPEC, "--input", "draft.json") == 0
    second = json.loads(path.read_text())
    assert second["scenarios"][0]["head_sha"] == first["head_sha"] != second["head_sha"]


def test_cli_refusals_exit_2_and_leave_the_receipt(repo: Path, run_cli: RunCli) -> None:
    (repo / "draft.json").write_text(json.dumps(draft()))
    assert run_cli("qa", "receipt", "--spec", "../x", "--input", "draft.json") == 2
    assert run_cli("qa", "receipt", "--spec", SPEC, "--input", "missing.json") == 2
    (repo / "bad.json").write_text(json.dumps(draft(scenarios=[dict(LIVE_PASS, rids=["X"])])))
    assert run_cli("qa", "receipt", "--spec", SPEC, "--input", "bad.json") == 2
    assert not (repo / ".flow").exists()
