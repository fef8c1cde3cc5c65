"""QuickCheckFunction's handler end to end: moto S3 packs, the real Lambda quick sandbox."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from dulwich.repo import Repo
from forkhorse.adapters.evidence import S3EvidenceDrop
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.domain.receipts import CheckRecord
from forkhorse.runner.workflow.contracts import InvalidStepInput
from forkhorse.wiring.handlers import providers

from tests.support.aws import create_table_from_template
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.observability import captured_log, json_lines
from tests.support.sandbox import BRAND

REPO_ROOT = Path(__file__).resolve().parents[3]
BUCKET = "quick-git"
CHECK = {"name": "brand", "tier": "quick", "module": ".forkhorse/quick/brand.py"}


@pytest.fixture
def function(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, S3GitHost]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "BUCKET_NAME": BUCKET,
    }.items():
        monkeypatch.setenv(name, value)
    with atomic_mock_aws(monkeypatch):
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        dynamodb = boto3.client("dynamodb")
        monkeypatch.setenv("TABLE_NAME", create_table_from_template(dynamodb))
        spec = importlib.util.spec_from_file_location(
            "quick_check_app", REPO_ROOT / "functions/quick_check/app.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        from forkhorse.wiring.aws import quick_deps

        quick_deps.cache_clear()  # each test's moto world gets fresh clients
        monkeypatch.setattr(providers, "quick", quick_deps)
        yield module, S3GitHost(boto3.client("s3"), dynamodb, BUCKET, os.environ["TABLE_NAME"])


def _push(host: S3GitHost, tmp_path: Path, brand: str) -> str:
    work = tmp_path / "work"
    (work / ".forkhorse/quick").mkdir(parents=True)
    (work / "brand.json").write_text(brand)
    (work / ".forkhorse/quick/brand.py").write_text(
        (REPO_ROOT / "examples/quick/brand.py").read_text()
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(work),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True)
    store = host.store("demo")
    with Repo(str(work)) as repo:
        store.objects.add_objects([(repo.object_store[s], None) for s in repo.object_store])
        return repo.head().decode()


def _event(commit: str, check: dict[str, object] = CHECK) -> dict[str, object]:
    run = {
        "projectId": "demo",
        "reviewId": "r1",
        "generation": "g1",
        "trigger": "review-created",
        "commit": commit,
    }
    return {"run": run, "check": check}


def _dropped(app: ModuleType, result: dict[str, object]) -> CheckRecord:
    del app
    drop = S3EvidenceDrop(boto3.client("s3"), BUCKET)
    return drop.take(str(result["evidence"]))


def test_the_handler_runs_the_brand_check_and_drops_its_evidence(
    function: tuple[ModuleType, S3GitHost], tmp_path: Path
) -> None:
    app, host = function
    commit = _push(host, tmp_path, BRAND)
    result = app.handler(_event(commit), FakeLambdaContext())
    record = _dropped(app, result)
    assert result["name"] == "brand"
    assert (record.outcome, record.platform, record.runtime) == (
        "passed",
        "aws-lambda",
        "dynamic-worker",
    )
    assert record.image_digest.startswith("module:sha256:")


@pytest.mark.parametrize(
    ("event", "named"),
    [
        (_event("0" * 40, {**CHECK, "tier": "full"}), "check.tier: Input should be 'quick'"),
        (_event("0" * 40, {**CHECK, "image": "default"}), "check.image: Extra inputs"),
        ({"run": {"commit": "0" * 40}, "check": CHECK}, "run.projectId: Field required"),
        ({"run": _event("0" * 40)["run"]}, "check: Field required"),
    ],
)
def test_a_bad_event_is_refused_before_anything_runs(
    function: tuple[ModuleType, S3GitHost], event: dict[str, object], named: str
) -> None:
    """The state machine builds these events; anything else is an error its Catch
    finalizes, naming the field."""
    app, _ = function
    with pytest.raises(InvalidStepInput, match=re.escape(named)):
        app.handler(event, FakeLambdaContext())


def test_a_missing_commit_fails_closed(function: tuple[ModuleType, S3GitHost]) -> None:
    app, _ = function
    record = _dropped(app, app.handler(_event("0" * 40), FakeLambdaContext()))
    assert (record.outcome, record.message, record.image_digest) == (
        "infrastructure-error",
        "The snapshot could not be opened.",
        "",
    )


def test_a_handlers_log_line_is_json_with_its_invocation_and_run(
    function: tuple[ModuleType, S3GitHost],
) -> None:
    app, _ = function
    with captured_log() as log:
        app.handler(_event("0" * 40), FakeLambdaContext())
    [line] = json_lines(log.getvalue())
    assert line["message"] == "quick check brand: the snapshot could not be opened"
    assert line["level"] == "ERROR"
    assert line["function_request_id"] == FakeLambdaContext.aws_request_id
    assert line["function_name"] == FakeLambdaContext.function_name
    assert (line["project"], line["review"], line["generation"]) == ("demo", "r1", "g1")
    assert "promotion" not in line
