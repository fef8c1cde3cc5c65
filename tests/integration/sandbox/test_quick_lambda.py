"""The Lambda quick sandbox, run here as it runs in QuickCheckFunction (minus the VPC)."""

from __future__ import annotations

import glob
import socket
from collections.abc import Callable

import pytest
from forkhorse.adapters.sandbox.lambda_ import LambdaSandbox, is_dumpable
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.receipts import CheckRecord

from tests.integration.sandbox.conftest import BRAND, MODULE, Committed

SECRET = "forkhorse-lambda-secret-91ab"


@pytest.fixture(scope="module")
def lambda_sandbox() -> LambdaSandbox:
    return LambdaSandbox()


@pytest.fixture
def run_in_lambda(
    lambda_sandbox: LambdaSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> Callable[[str], CheckRecord]:
    def run(source: str) -> CheckRecord:
        committed = commit_files({"brand.json": BRAND, MODULE: source})
        return lambda_sandbox.run_check(committed.snapshot, QuickCheckDef(name="p", module=MODULE))

    return run


def test_the_parent_is_not_dumpable(lambda_sandbox: LambdaSandbox) -> None:
    assert not is_dumpable()


def test_a_check_passes_with_lambda_evidence(run_in_lambda: Callable[[str], CheckRecord]) -> None:
    record = run_in_lambda(
        "def check(ctx):\n    return {'ok': ctx.read('brand.json') is not None}\n"
    )
    assert (record.outcome, record.platform, record.runtime) == (
        "passed",
        "aws-lambda",
        "dynamic-worker",
    )


def test_the_environment_is_scrubbed_and_the_temp_dir_is_private_and_wiped(
    run_in_lambda: Callable[[str], CheckRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    source = """\
import os, tempfile

def check(ctx):
    path = tempfile.mkstemp()[1]
    return {"ok": False, "message": "%s|%s" % (sorted(os.environ), path)}
"""
    record = run_in_lambda(source)
    keys, temp_file = record.message.split("|")
    assert keys == "['TMPDIR']"
    assert temp_file.startswith("/tmp/forkhorse-quick-")
    assert SECRET not in record.message
    assert glob.glob("/tmp/forkhorse-quick-*") == []


def test_sockets_and_processes_are_refused(run_in_lambda: Callable[[str], CheckRecord]) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    source = f"""\
import os, socket

def check(ctx):
    refused = []
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1)
    except OSError:
        refused.append("socket")
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
    except OSError:
        refused.append("fork")
    return {{"ok": False, "message": ",".join(refused)}}
"""
    record = run_in_lambda(source)
    with pytest.raises(TimeoutError):
        server.accept()
    server.close()
    assert record.message == "socket,fork"


def test_a_raising_check_fails_with_a_static_message(
    run_in_lambda: Callable[[str], CheckRecord],
) -> None:
    record = run_in_lambda(f"def check(ctx):\n    raise KeyError('{SECRET}')\n")
    assert (record.outcome, record.message) == ("failed", "The check raised an exception.")
