"""Issue 30: every producer input and existing receipt is read by one strict reader, and a
producer either writes a receipt `receipt validate` accepts or refuses with exit 2 and one line.

The exit-code cases run the real `forkhorse` entry point as a separate process, so a traceback
(exit 1) cannot hide behind an in-process exception handler.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from forkhorse.flow.classify import classify_receipt
from forkhorse.flow.currentness import select_current
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.history import history_path, receipt_lock, write_latest
from forkhorse.flow.producer import AttachError, attach
from forkhorse.flow.rules import RuleViolation

from tests.unit.flow.flow_factories import BASE, HEAD, git, receipt, root
from tests.unit.flow.test_flow_producer_process import forkhorse

FINDING = "Severity: Major\nConfidence: 75\nClassification: introduced\nProblem: Drops errors.\n"
BASE_RECEIPT = '{"type": "impl_review", "id": "fn-1.1", "mode": "codex", "verdict": "NEEDS_WORK"'
QA_DRAFT = '{"qa_outcome": "SHIP", "mode": "claude"'


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# A field each: the reader must refuse the whole input, as `receipt validate` would the output.
BAD_FIELDS = {
    "nan": '"score": NaN',
    "infinity": '"score": Infinity',
    "minus-infinity": '"score": -Infinity',
    "overflow": '"score": 1e999',
    "deep-100": f'"extra": {nested(100)}',
    "lone-surrogate": '"note": "\\ud800"',
}
BAD_INPUTS = {
    **{name: "{" + field + ", {fields}" for name, field in BAD_FIELDS.items()},
    "deep-100000": nested(100_000),
}


def assert_refused(done: subprocess.CompletedProcess[str]) -> None:
    """Exit 2 with exactly one line on stderr, and no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("error: ")


def attach_argv(receipt_path: str = "out/impl.json", review: str = "review.md") -> list[str]:
    argv = ["review-findings", "attach", "--receipt", receipt_path, "--input", "input.json"]
    return [*argv, "--review-file", review, "--head", "HEAD"]


def fill(template: str, opening: str) -> str:
    """A bad input whose other fields are a well-formed receipt/draft."""
    if not template.startswith("{"):
        return template
    return template.replace("{fields}", opening[1:])


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_attach_refuses_an_input_the_validator_would_refuse(repo: Path, name: str) -> None:
    (repo / "input.json").write_text(fill(BAD_INPUTS[name], BASE_RECEIPT + "}"))
    (repo / "review.md").write_text(FINDING)
    done = forkhorse(repo, *attach_argv())
    assert_refused(done)
    assert "input.json: " in done.stderr  # the line names the file it refuses
    assert not (repo / "out" / "impl.json").exists()


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_qa_receipt_refuses_an_input_the_validator_would_refuse(repo: Path, name: str) -> None:
    (repo / "qa.json").write_text(fill(BAD_INPUTS[name], QA_DRAFT + "}"))
    done = forkhorse(repo, "qa", "receipt", "--spec", "fn-1", "--input", "qa.json")
    assert_refused(done)
    assert "qa.json: " in done.stderr
    assert not (repo / ".flow" / "review-receipts" / "qa-fn-1.json").exists()


def test_the_inputs_are_well_formed_without_the_bad_field(repo: Path) -> None:
    """The refusals above are the bad field's doing: the same inputs without it are written."""
    (repo / "input.json").write_text(BASE_RECEIPT + "}")
    (repo / "review.md").write_text(FINDING)
    assert forkhorse(repo, *attach_argv()).returncode == 0
    (repo / "qa.json").write_text(QA_DRAFT + "}")
    done = forkhorse(repo, "qa", "receipt", "--spec", "fn-1", "--input", "qa.json")
    assert done.returncode == 0, done.stderr
    written = ["out/impl.json", ".flow/review-receipts/qa-fn-1.json"]
    assert forkhorse(repo, "receipt", "validate", *written).returncode == 0


def test_a_deeply_nested_receipt_at_the_target_path_is_no_prior_generation(repo: Path) -> None:
    """Unreadable (as `receipt validate` finds it): no parent, and the new root replaces it."""
    (repo / "out").mkdir()
    (repo / "out" / "impl.json").write_text(nested(100_000))
    (repo / "input.json").write_text(BASE_RECEIPT + "}")
    (repo / "review.md").write_text(FINDING)
    done = forkhorse(repo, *attach_argv(), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["findings_attached"] is True
    written = json.loads((repo / "out" / "impl.json").read_text())
    assert written["findings"]["round"] == 1
    assert forkhorse(repo, "receipt", "validate", "out/impl.json").returncode == 0


def test_a_deeply_nested_prior_qa_receipt_is_refused_in_one_line(repo: Path) -> None:
    folder = repo / ".flow" / "review-receipts"
    folder.mkdir(parents=True)
    (folder / "qa-fn-1.json").write_text(nested(100_000))
    (repo / "qa.json").write_text(QA_DRAFT + "}")
    done = forkhorse(repo, "qa", "receipt", "--spec", "fn-1", "--input", "qa.json")
    assert_refused(done)
    assert (folder / "qa-fn-1.json").read_text() == nested(100_000)


# --- the parent is preserved whatever its envelope --------------------------------------------


def test_a_parent_with_a_bad_envelope_is_preserved_and_the_chain_stays_current(
    repo: Path,
) -> None:
    (repo / "input.json").write_text(BASE_RECEIPT + "}")
    (repo / "review.md").write_text(FINDING)
    assert forkhorse(repo, *attach_argv()).returncode == 0
    latest = repo / "out" / "impl.json"
    parent = json.loads(latest.read_text())
    parent["verdict"] = "LGTM"  # the envelope is edited; the findings stay valid
    latest.write_text(json.dumps(parent))
    (repo / "fixed.md").write_text(
        "Prior finding 1: fixed\n\nNo findings.\n<verdict>SHIP</verdict>"
    )
    done = forkhorse(repo, *attach_argv(review="fixed.md"), "--json")
    assert done.returncode == 0, done.stderr
    source = parent["findings"]["sourceReceiptId"]
    assert json.loads(history_path(latest, source).read_text()) == parent
    head = git(repo, "rev-parse", "HEAD").strip()
    argv = ["findings", "current", "--json", "--head", head, "--kind", "implementation"]
    current = forkhorse(repo, *argv, "--backend", "codex", "out/impl.json")
    assert current.returncode == 0, current.stdout
    payload = json.loads(current.stdout)
    assert payload["status"] == "current"
    assert payload["chain"] == [json.loads(done.stdout)["source_receipt_id"], source]


# --- R-IDs: the parser takes only what the validator accepts -----------------------------------


def test_a_non_ascii_digit_r_id_is_not_an_r_id_and_drops_nothing(repo: Path) -> None:
    review = (
        "Severity: Major\nConfidence: 75\nClassification: introduced\n"
        "Problem: Breaks R\u0661 and R2 and R3\u0662.\n\n" + FINDING
    )
    (repo / "input.json").write_text(BASE_RECEIPT + "}")
    (repo / "review.md").write_text(review, encoding="utf-8")
    done = forkhorse(repo, *attach_argv(), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings_attached"] is True
    items = json.loads((repo / "out" / "impl.json").read_text())["findings"]["items"]
    assert sorted(item["rIds"] for item in items) == [[], ["R2"]]
    assert forkhorse(repo, "receipt", "validate", "out/impl.json").returncode == 0


# --- the writer never emits what the reader refuses ---------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [math.nan, math.inf, "\ud800", {"\udfff": 1}, json.loads(nested(70))],
    ids=["nan", "inf", "surrogate", "surrogate-key", "deep-70"],
)
def test_the_writers_refuse_what_the_reader_would_refuse(tmp_path: Path, extra: Any) -> None:
    body = {"type": "impl_review", "id": "fn-1.1", "mode": "codex", "verdict": "NEEDS_WORK"}
    body["extra"] = extra
    path = tmp_path / "impl.json"
    with pytest.raises(AttachError):
        attach(body, FINDING, path, head_sha=HEAD, base_sha=BASE)
    with pytest.raises(RuleViolation):
        write_latest(path, body)
    assert not path.exists()


# --- the never-raising readers on a lone surrogate ----------------------------------------------


@pytest.mark.parametrize("field", ["firstSeenReceiptId", "title"])
def test_a_lone_surrogate_is_a_violation_not_an_exception(field: str) -> None:
    findings = root("review-1", 1)
    findings["items"][0][field] = "review-\ud800"
    body = receipt(findings)
    validation = validate_receipt(body)
    assert not validation.valid
    assert validation.violation is not None
    selection = select_current([body], head_sha=HEAD, review_kind="implementation", backend="codex")
    assert selection.status == "unsupported"
    classified = classify_receipt(body, HEAD, [body])
    assert (classified["valid"], classified["findings"]) == (False, "unsupported")


def test_a_lone_surrogate_in_a_source_id_is_a_violation_not_an_exception() -> None:
    findings = root("review-1", 0)
    findings["sourceReceiptId"] = "review-\udc00"
    body = receipt(findings)
    assert not validate_receipt(body).valid
    selection = select_current([body], head_sha=HEAD, review_kind="implementation", backend="codex")
    assert selection.status == "unsupported"
    assert classify_receipt(body, HEAD)["valid"] is False


# --- a refusal under the writers' lock stays a refusal -----------------------------------------


def test_a_rule_violation_under_the_receipt_lock_is_raised_as_itself(tmp_path: Path) -> None:
    """`attach` and `write_latest` turn a RuleViolation into exit 2; under a generator-based
    lock it became a TypeError (its `__traceback__` cannot be assigned), i.e. a traceback."""
    with pytest.raises(RuleViolation), receipt_lock(tmp_path / "impl.json"):
        raise RuleViolation("receipt.json", "", "refused")
    with receipt_lock(tmp_path / "impl.json"):  # released: taking it again does not block
        pass
