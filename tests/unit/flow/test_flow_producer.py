"""Producing review receipts: the prose bound, `attach` lineage and history, and crash safety."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow import producer
from forkhorse.flow.currentness import select_current
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.history import history_dir, history_path, read_generations
from forkhorse.flow.producer import AttachError, attach, finish_pending, journal_path
from forkhorse.flow.prose import ParseScope, parse_findings

from tests.unit.flow.flow_factories import BASE, HEAD, OTHER_HEAD, RunCli, git

FINDING = """\
Severity: Major
Confidence: 75
Classification: introduced
File:Line: src/app.py:12-14
Problem: The handler drops errors. It returns 200 on failure.
Suggestion: Propagate the error.
<verdict>NEEDS_WORK</verdict>
"""
FIXED = "Prior finding 1: fixed\n\nNo findings.\n<verdict>SHIP</verdict>\n"
EMPTY_SHIP = "No findings.\n<verdict>SHIP</verdict>"
ROOT_SCOPE = ParseScope("review-1", "implementation", "codex", 1, HEAD, BASE, anchor_side="head")


def base_receipt(**extra: Any) -> dict[str, Any]:
    value = {"type": "impl_review", "id": "fn-1.1", "mode": "codex", "verdict": "NEEDS_WORK"}
    value.update(extra)
    return value


def read(path: Path) -> Any:
    return json.loads(path.read_text())


# --- the 1 MiB input bound ----------------------------------------------------------------------


def test_review_text_of_exactly_one_mib_parses_and_one_byte_more_is_absent() -> None:
    padding = FLOW_PRODUCER.review_text_bytes - len(EMPTY_SHIP.encode()) - 1
    at_limit = EMPTY_SHIP + "\n" + "x" * padding
    assert len(at_limit.encode()) == FLOW_PRODUCER.review_text_bytes
    parsed = parse_findings(at_limit, ROOT_SCOPE)
    assert parsed is not None
    assert parsed["items"] == []
    assert parse_findings(at_limit + "x", ROOT_SCOPE) is None


def test_a_multibyte_text_is_measured_in_utf8_bytes() -> None:
    text = EMPTY_SHIP + "\n" + "\u00e9" * (FLOW_PRODUCER.review_text_bytes // 2)
    assert len(text) < FLOW_PRODUCER.review_text_bytes < len(text.encode())
    assert parse_findings(text, ROOT_SCOPE) is None


def test_prose_without_structure_is_absent_not_an_empty_ship() -> None:
    assert parse_findings("Looks fine to me.\n<verdict>SHIP</verdict>", ROOT_SCOPE) is None
    assert parse_findings(EMPTY_SHIP, ROOT_SCOPE) == {
        "schemaVersion": 1,
        "sourceReceiptId": "review-1",
        "reviewKind": "implementation",
        "backend": "codex",
        "round": 1,
        "baseSha": BASE,
        "headSha": HEAD,
        "items": [],
    }


# --- attach: lineage and history ----------------------------------------------------------------


def test_attach_builds_a_root_then_a_successor_and_keeps_the_history(tmp_path: Path) -> None:
    path = tmp_path / "receipts" / "impl.json"
    first = attach(base_receipt(), FINDING, path, head_sha=HEAD, base_sha=BASE)
    assert first.findings_attached
    assert validate_receipt(read(path)).valid
    root = read(path)["findings"]
    [item] = root["items"]
    assert (item["severity"], item["status"], item["anchor"]["startLine"]) == ("P1", "open", 12)
    assert item["suggestion"] == "Propagate the error."

    second = attach(base_receipt(verdict="SHIP"), FIXED, path, head_sha=OTHER_HEAD, base_sha=BASE)
    latest = read(path)
    findings = latest["findings"]
    assert second.payload()["source_receipt_id"] == findings["sourceReceiptId"]
    assert (findings["round"], findings["supersedesReceiptId"]) == (2, root["sourceReceiptId"])
    [carried] = findings["items"]
    assert (carried["id"], carried["status"]) == (item["id"], "fixed")
    assert "anchor" not in carried  # no fresh location at the new head
    assert read(history_path(path, root["sourceReceiptId"]))["findings"] == root
    receipts = [generation.receipt for generation in read_generations(path)]
    selection = select_current(
        receipts, head_sha=OTHER_HEAD, review_kind="implementation", backend="codex"
    )
    assert selection.tip == findings


def test_a_not_fixed_status_reads_open_when_the_next_round_is_silent(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    attach(base_receipt(), FINDING, path, head_sha=HEAD, base_sha=BASE)
    attach(base_receipt(), "Prior finding 1: not-fixed\n", path, head_sha=HEAD, base_sha=BASE)
    assert read(path)["findings"]["items"][0]["status"] == "not_fixed"
    unknown_edge = FINDING.replace("Suggestion:", "Prior Finding ID: finding-nope\nSuggestion:")
    attach(base_receipt(), unknown_edge, path, head_sha=HEAD)
    assert read(path).get("findings") is None  # an unknown edge: absent, never a guess
    attach(base_receipt(), "Prior findings: all fixed\n", path, head_sha=HEAD, base_sha=BASE)
    # The unparseable round dropped the field, so the lineage restarts from no prior.
    assert read(path)["findings"]["round"] == 1


def test_the_all_clear_sweeps_open_findings_but_keeps_withdrawn(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    two = FINDING.replace("<verdict>NEEDS_WORK</verdict>\n", "") + "\n" + FINDING
    attach(base_receipt(), two, path, head_sha=HEAD, base_sha=BASE)
    attach(base_receipt(), "Prior finding 2: withdrawn\n", path, head_sha=HEAD, base_sha=BASE)
    attach(base_receipt(), "Prior findings: all fixed.\n", path, head_sha=HEAD, base_sha=BASE)
    statuses = {i["ordinal"]: i["status"] for i in read(path)["findings"]["items"]}
    assert statuses == {1: "fixed", 2: "withdrawn"}


def test_a_prior_of_another_scope_is_not_a_parent(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    attach(base_receipt(), FINDING, path, head_sha=HEAD, base_sha=BASE)
    attach(base_receipt(id="fn-2.1"), FINDING, path, head_sha=HEAD, base_sha=BASE)
    findings = read(path)["findings"]
    assert findings["round"] == 1
    assert "supersedesReceiptId" not in findings


def test_attach_refuses_an_input_without_type_id_or_mode(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    for broken in ({"type": "nope", "id": "x", "mode": "codex"}, {"type": "impl_review"}):
        with pytest.raises(AttachError):
            attach(broken, FINDING, path, head_sha=HEAD)
    assert not path.exists()


def test_attach_refuses_an_invalid_receipt_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    attach(base_receipt(), FINDING, path, head_sha=HEAD, base_sha=BASE)
    before = path.read_bytes()
    with pytest.raises(AttachError, match=r"receipt\.verdict"):
        attach(base_receipt(verdict="Ship"), FIXED, path, head_sha=HEAD, base_sha=BASE)
    assert path.read_bytes() == before
    assert not journal_path(path).exists()


def test_completion_criteria_attach_only_when_ids_match_the_configuration(tmp_path: Path) -> None:
    path = tmp_path / "completion.json"
    text = EMPTY_SHIP.replace("<verdict>", "## Global criteria\nG1: met\nG2: n/a - docs\n<verdict>")
    receipt = base_receipt(type="completion_review", verdict="SHIP")
    result = attach(receipt, text, path, head_sha=HEAD, configured_criteria=("G1", "G2"))
    assert result.payload()["criteria_attached"] is True
    assert read(path)["criteria"] == [
        {"id": "G1", "status": "met"},
        {"id": "G2", "status": "n/a", "note": "docs"},
    ]
    attach(receipt, text, path, head_sha=HEAD, configured_criteria=("G1", "G2", "G3"))
    assert "criteria" not in read(path)


# --- crash safety -------------------------------------------------------------------------------

CRASHING_ATTACH = """
import json, os, sys
from pathlib import Path
from forkhorse.flow import history, producer

path, step = Path(sys.argv[1]), sys.argv[2]
if step == "after-journal":
    producer.publish_latest = lambda *a, **k: os._exit(9)
else:  # after the old generation is preserved, before the latest is replaced
    real = history.atomic_write_json
    def crash_on_latest(target, value):
        if target == path:
            os._exit(9)
        real(target, value)
    history.atomic_write_json = crash_on_latest
receipt = {"type": "impl_review", "id": "fn-1.1", "mode": "codex", "verdict": "SHIP"}
producer.attach(receipt, sys.argv[3], path, head_sha="c" * 40, base_sha="a" * 40)
"""


@pytest.mark.parametrize("step", ["after-journal", "after-history"])
def test_a_crashed_attach_leaves_the_old_receipt_and_the_next_attach_finishes_it(
    tmp_path: Path, step: str
) -> None:
    path = tmp_path / "impl.json"
    attach(base_receipt(), FINDING, path, head_sha=HEAD, base_sha=BASE)
    before = path.read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    crashed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CRASHING_ATTACH), str(path), step, FIXED],
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert crashed.returncode == 9, crashed.stderr.decode()
    assert path.read_bytes() == before  # readers still see a whole, valid receipt
    assert journal_path(path).exists()
    assert finish_pending(path)
    finished = read(path)
    assert finished["verdict"] == "SHIP"
    assert finished["findings"]["round"] == 2
    assert finished["findings"]["items"][0]["status"] == "fixed"
    root_id = json.loads(before)["findings"]["sourceReceiptId"]
    assert history_path(path, root_id).read_bytes() == before
    assert not journal_path(path).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


class Interrupted(Exception):
    pass


def test_the_next_attach_completes_a_pending_journal_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "impl.json"
    attach(base_receipt(), FINDING, path, head_sha=HEAD, base_sha=BASE)

    def interrupted(*_: object) -> None:
        raise Interrupted

    with monkeypatch.context() as patch:
        patch.setattr(producer, "publish_latest", interrupted)
        with pytest.raises(Interrupted):
            attach(base_receipt(), "Prior finding 1: not fixed\n", path, head_sha=HEAD)
    assert read(path)["findings"]["round"] == 1
    assert journal_path(path).exists()
    attach(base_receipt(), FIXED, path, head_sha=HEAD, base_sha=BASE)
    rounds = sorted(g.receipt["findings"]["round"] for g in read_generations(path))
    assert rounds == [1, 2, 3]  # the journaled round 2 was published before round 3 was built
    assert read(path)["findings"]["items"][0]["status"] == "fixed"


def test_an_unreadable_journal_stops_the_attach(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    journal_path(path).write_text("{not json")
    with pytest.raises(AttachError, match="journal"):
        attach(base_receipt(), FINDING, path, head_sha=HEAD)
    assert not path.exists()


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_attach_resolves_the_head_and_prints_json(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "input.json").write_text(json.dumps(base_receipt()))
    (repo / "review.md").write_text(FINDING)
    receipt = repo / ".flow" / "review-receipts" / "impl.json"
    code = run_cli(
        "review-findings",
        "attach",
        "--json",
        "--receipt",
        str(receipt),
        "--input",
        "input.json",
        "--review-file",
        "review.md",
        "--head",
        "HEAD",
        "--base",
        "HEAD",
    )
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    head = git(repo, "rev-parse", "HEAD")
    findings = read(receipt)["findings"]
    assert payload == {
        "success": True,
        "receipt": str(receipt),
        "findings_attached": True,
        "source_receipt_id": findings["sourceReceiptId"],
    }
    assert findings["headSha"] == head
    assert findings["items"][0]["anchor"]["baseSha"] == head


def test_cli_attach_errors_exit_2_and_write_nothing(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    receipt = repo / "impl.json"
    (repo / "review.md").write_text(FINDING)
    (repo / "list.json").write_text("[]")
    (repo / "big.md").write_text("x" * (FLOW_PRODUCER.review_text_bytes + 1))
    (repo / "input.json").write_text(json.dumps(base_receipt()))
    common = ["review-findings", "attach", "--json", "--receipt", str(receipt)]
    cases = [
        ["--input", "list.json", "--review-file", "review.md", "--head", "HEAD"],
        ["--input", "missing.json", "--review-file", "review.md", "--head", "HEAD"],
        ["--input", "input.json", "--review-file", "big.md", "--head", "HEAD"],
        ["--input", "input.json", "--review-file", "review.md", "--head", "no-such-ref"],
    ]
    for case in cases:
        assert run_cli(*common, *case) == 2
        assert "error" in json.loads(capsys.readouterr().err.splitlines()[-1])
    assert not receipt.exists()


# --- read bounds --------------------------------------------------------------------------------


def test_history_entries_beyond_the_bound_are_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    folder = history_dir(path)
    folder.mkdir()
    for index in range(FLOW_PRODUCER.history_entries):
        (folder / f"{index:064x}.json").write_text("{}")
    with pytest.raises(AttachError, match="no unique tip"):  # read, and none is a tip
        attach(base_receipt(), FINDING, path, head_sha=HEAD)
    (folder / "one-more.json").write_text("{}")
    with pytest.raises(AttachError, match=f"more than {FLOW_PRODUCER.history_entries}"):
        attach(base_receipt(), FINDING, path, head_sha=HEAD)
    assert not path.exists()


def test_a_latest_receipt_over_the_read_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    pad = FLOW_PRODUCER.receipt_file_bytes - len(json.dumps(base_receipt(pad="")))
    path.write_text(json.dumps(base_receipt(pad="x" * pad)))
    assert path.stat().st_size == FLOW_PRODUCER.receipt_file_bytes
    attach(base_receipt(), FINDING, path, head_sha=HEAD)  # at the bound: read, replaced
    path.write_text(json.dumps(base_receipt(pad="x" * (pad + 1))))
    with pytest.raises(AttachError, match="larger than"):
        attach(base_receipt(), FINDING, path, head_sha=HEAD)


CONCURRENT_ATTACH = """
import sys
from pathlib import Path
from forkhorse.flow.producer import attach

text = sys.argv[2]
receipt = {"type": "impl_review", "id": "fn-1.1", "mode": "codex", "verdict": "NEEDS_WORK"}
attach(receipt, text, Path(sys.argv[1]), head_sha="b" * 40, base_sha="a" * 40)
"""


def test_concurrent_attaches_serialise_into_one_lineage(tmp_path: Path) -> None:
    path = tmp_path / "impl.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_ATTACH, str(path), FINDING.replace("drops", f"w{n}")],
            env=env,
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read() if writer.stderr else ""
    receipts = [generation.receipt for generation in read_generations(path)]
    rounds = sorted(receipt["findings"]["round"] for receipt in receipts)
    assert rounds == [1, 2, 3, 4]
    selection = select_current(
        receipts, head_sha=HEAD, review_kind="implementation", backend="codex"
    )
    assert selection.tip is not None
    assert selection.tip["round"] == 4
    assert len(selection.tip["items"]) == 4  # every writer's finding, none lost


def test_cli_attach_binds_criteria_to_the_configured_file(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".flow").mkdir()
    (repo / ".flow" / "criteria.md").write_text("- **G1:** Tests.\n- **G2:** Docs.\n")
    (repo / "input.json").write_text(json.dumps(base_receipt(type="completion_review")))
    (repo / "review.md").write_text(
        "No findings.\n## Global criteria\nG1: met\nG2: violated - no docs\n<verdict>SHIP</verdict>"
    )
    argv = ["review-findings", "attach", "--json", "--receipt", "c.json", "--input", "input.json"]
    assert run_cli(*argv, "--review-file", "review.md", "--head", "HEAD") == 0
    assert json.loads(capsys.readouterr().out)["criteria_attached"] is True
    assert read(repo / "c.json")["criteria"][1] == {
        "id": "G2",
        "status": "violated",
        "note": "no docs",
    }
