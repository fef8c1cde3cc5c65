"""Metrics of receipt runs: CloudWatch EMF from the Lambda steps, log records locally."""

from __future__ import annotations

import pytest
from forkhorse.wiring.handlers import providers

from tests.integration.runner.scenarios import SCENARIOS
from tests.support.aws import load_function
from tests.support.lambda_context import FakeLambdaContext
from tests.support.observability import captured_log, emf_metrics, json_lines
from tests.support.runner import World

QUICK_FAILURE = next(s for s in SCENARIOS if s.name == "quick-failure-skips-full")


def test_the_finalize_step_emits_the_receipts_outcome_and_duration_as_emf(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = world.review(QUICK_FAILURE.files)
    monkeypatch.setattr(providers, "runner", lambda: world.runtime.deps)
    finalize = load_function("run_finalize")
    capsys.readouterr()
    event = {"run": run.model_dump(mode="json"), "infrastructureError": True}
    assert finalize.handler(event, FakeLambdaContext())["status"] == "infrastructure-error"

    metrics = emf_metrics(capsys.readouterr().out)
    by_name = {metric["name"]: metric for metric in metrics}
    assert by_name["Receipts"] == {
        "namespace": "Forkhorse",
        "name": "Receipts",
        "unit": "Count",
        "value": [1.0],
        "outcome": "infrastructure-error",
    }
    assert by_name["RunDuration"]["unit"] == "Milliseconds"
    assert by_name["RunDuration"]["outcome"] == "infrastructure-error"
    assert by_name["RunDuration"]["value"][0] >= 0


def test_a_local_run_records_its_metrics_in_the_log_and_prints_no_emf(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    run = world.review(QUICK_FAILURE.files)
    capsys.readouterr()
    with captured_log() as log:
        world.run(run)

    assert emf_metrics(capsys.readouterr().out) == []
    metrics = [line for line in json_lines(log.getvalue()) if line["message"] == "metric"]
    seen = {(m["metric"], m.get("outcome"), m.get("tier")) for m in metrics}
    assert ("Receipts", "failed", None) in seen
    assert ("QuickGateRefusals", None, None) in seen
    assert ("CheckDuration", "failed", "quick") in seen
    receipts = next(m for m in metrics if m["metric"] == "Receipts")
    assert (receipts["unit"], receipts["value"]) == ("Count", 1)
