"""Receipt runs through the local supervisor, with real sandboxes and real containers."""

from __future__ import annotations

from dataclasses import replace

import pytest
from forkhorse.domain.canonical import canonical_bytes, digest_of
from forkhorse.domain.gate import reason_code, validate_required
from forkhorse.domain.receipts import SKIPPED_FULL_MESSAGE
from forkhorse.ports.clock import SystemClock
from forkhorse.records import get_json
from forkhorse.runner.local.history import HISTORY_SUFFIX
from forkhorse.runner.workflow.steps import UNATTACHED_MESSAGE
from forkhorse.service.approvals import gather_evidence
from forkhorse.service.context import Context, ServiceSettings

from tests.integration.runner.scenarios import (
    BRAND,
    FAILING_QUICK,
    PASSING_QUICK,
    SCENARIOS,
    Scenario,
    checks_file,
    full,
    quick,
)
from tests.support.runner import World


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_outcome(world: World, scenario: Scenario) -> None:
    run = world.review(scenario.files)
    world.run(run)
    summary = world.summary(run.review_id)
    if scenario.status is None:
        assert summary is None, "a commit without .forkhorse/checks reads receipt: null"
        return
    assert summary is not None
    assert summary.status == scenario.status
    assert tuple((c.name, c.outcome) for c in summary.checks) == scenario.outcomes
    assert (summary.digest is not None) == scenario.attached
    assert summary.finished_at is not None
    assert summary.duration_ms is not None


def test_passing_run_attaches_a_verifiable_mixed_record(world: World) -> None:
    run = world.review(SCENARIOS[0].files)
    world.run(run)
    record = world.record(run.review_id)
    assert record.evidence == "mixed"
    assert record.platform == "local-bwrap+podman"
    assert (record.commit, record.generation, record.trigger) == (
        run.commit,
        run.generation,
        run.trigger,
    )
    quick_check, full_check = record.checks
    assert quick_check.image_digest.startswith("module:sha256:")
    assert full_check.image_digest.startswith("localhost/") or "@sha256:" in full_check.image_digest
    assert full_check.stdout.text == "ok\n"
    summary = world.summary(run.review_id)
    stored = get_json(world.store, summary.digest)
    assert digest_of(canonical_bytes(stored)) == summary.digest


def test_a_failing_quick_check_starts_no_container_and_exports_nothing(world: World) -> None:
    files = {
        "brand.json": BRAND,
        ".forkhorse/quick/brand.py": FAILING_QUICK,
        ".forkhorse/checks": checks_file(
            quick("brand", "brand"), full("a", "true"), full("b", "true")
        ),
    }
    run = world.review(files)
    world.run(run)
    assert world.containers.started == []
    assert not any((world.runtime.home / "checkouts").iterdir())
    skipped = world.record(run.review_id).checks[1:]
    assert [(c.outcome, c.duration_ms, c.image_digest, c.message) for c in skipped] == [
        ("failed", None, "", SKIPPED_FULL_MESSAGE)
    ] * 2


def test_a_quick_only_suite_never_starts_a_container(world: World) -> None:
    files = {
        "brand.json": BRAND,
        ".forkhorse/quick/brand.py": PASSING_QUICK,
        ".forkhorse/checks": checks_file(quick("brand", "brand")),
    }
    run = world.review(files)
    world.run(run)
    assert world.summary(run.review_id).status == "passed"
    assert world.record(run.review_id).evidence == "dynamic-worker"
    assert world.containers.started == []


BRAND_JS = """\
export default async (ctx) => {
  const brand = JSON.parse(await ctx.read("brand.json"));
  return { ok: typeof brand.name === "string", message: "Checked brand.json." };
};
"""


def test_a_javascript_quick_check_runs_and_the_gate_rehashes_its_module(world: World) -> None:
    files = {
        "brand.json": BRAND,
        ".forkhorse/quick/brand.js": BRAND_JS,
        ".forkhorse/checks": checks_file(
            {"name": "brand-quick", "tier": "quick", "module": ".forkhorse/quick/brand.js"}
        ),
    }
    run = world.review(files)
    world.run(run)
    (check,) = world.record(run.review_id).checks
    assert (check.outcome, check.runtime, check.message) == (
        "passed",
        "dynamic-worker",
        "Checked brand.json.",
    )
    assert check.image_digest == "module:sha256:" + digest_of(BRAND_JS.encode())
    assert world.containers.started == []
    context = Context(world.store, world.runtime.git, None, SystemClock(), ServiceSettings())
    review = world.store.get_review(run.review_id)
    assert review is not None
    evidence = gather_evidence(context, review, run.commit)
    assert evidence.module_sources == {".forkhorse/quick/brand.js": BRAND_JS}
    assert validate_required(evidence) == []
    edited = {".forkhorse/quick/brand.js": BRAND_JS + "// edited\n"}
    reasons = validate_required(replace(evidence, module_sources=edited))
    assert [reason_code(reason) for reason in reasons] == ["altered"]


def test_history_follows_the_state_machine(world: World) -> None:
    run = world.review(SCENARIOS[0].files)
    world.run(run)
    events = world.runtime.supervisor.history(run)
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
    ]
    assert entered == [
        "Prepare",
        "QuickChecks",
        "QuickRuntime",
        "QuickCheck",
        "QuickRecord",
        "QuickGate",
        "FullChecks",
        "FullStart",
        "Finalize",
    ]
    assert events[0]["type"] == "ExecutionStarted"
    assert events[-1]["type"] == "ExecutionSucceeded"


def test_a_long_check_costs_the_history_what_a_short_one_does(world: World) -> None:
    """FullStart waits for the container's end, as its state waits for a task token: the
    history does not grow with a check's duration, and each event is one appended line
    (no rewrite of the history per event)."""
    lengths = []
    for seconds in (0, 3):
        run = world.review({".forkhorse/checks": checks_file(full("slow", f"sleep {seconds}"))})
        world.run(run)
        assert world.summary(run.review_id).status == "passed"
        lengths.append(len(world.runtime.supervisor.history(run)))
    assert lengths[0] == lengths[1], lengths
    events = world.runtime.supervisor.history(run)
    path = next(world.runtime.home.rglob(f"{run.generation}{HISTORY_SUFFIX}"))
    assert len(path.read_text().splitlines()) == len(events)


def test_progress_is_visible_while_checks_run(world: World) -> None:
    files = {".forkhorse/checks": checks_file(full("slow", "sleep 3"))}
    run = world.review(files)
    world.runtime.supervisor.start_run(run)
    seen = set()
    while not world.runtime.supervisor.wait(run, 0.1):
        summary = world.summary(run.review_id)
        seen.add((summary.status, tuple(c.outcome for c in summary.checks), summary.digest))
    assert ("running", ("running",), None) in seen
    assert world.summary(run.review_id).status == "passed"


def test_a_newer_generation_makes_the_older_one_unattachable(world: World) -> None:
    files = {".forkhorse/checks": checks_file(full("slow", "sleep 2; echo old"))}
    older = world.review(files)
    world.runtime.supervisor.start_run(older)
    newer = world.restart(older.review_id, older.commit)
    assert world.runtime.supervisor.wait(older, 60)
    summary = world.summary(older.review_id)
    assert summary.status == "running", "the stale run must not touch the newer execution"
    assert summary.digest is None
    world.run(newer)
    assert world.summary(older.review_id).status == "passed"
    assert world.record(older.review_id).generation == newer.generation


def test_an_expired_claim_leaves_the_record_unattached(world: World) -> None:
    files = {".forkhorse/checks": checks_file(full("quick-one", "true"))}
    run = world.review(files)
    assert world.store.release_claim("packet-1", "agent-1")
    world.run(run)
    summary = world.summary(run.review_id)
    assert summary.digest is None, "no live claim, no attach"
    assert summary.status == "infrastructure-error", "a null digest never reads as passed"
    assert [c.outcome for c in summary.checks] == ["passed", "infrastructure-error"]
    assert summary.checks[-1].message == UNATTACHED_MESSAGE
