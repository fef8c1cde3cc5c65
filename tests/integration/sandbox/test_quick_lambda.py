"""The Lambda quick sandbox, run here as it runs in QuickCheckFunction (minus the VPC)."""

from __future__ import annotations

import glob
import socket
from collections.abc import Callable

import pytest
from forkhorse.adapters.sandbox.lambda_ import LambdaLauncher, LambdaSandbox, is_dumpable
from forkhorse.adapters.sandbox.programs import ChildProgram, node_limits
from forkhorse.adapters.sandbox.runtime import node_runtime
from forkhorse.adapters.sandbox.seccomp import filter_program
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.limits import QUICK_SANDBOX
from forkhorse.domain.receipts import CheckRecord

from tests.support.sandbox import BRAND, JS_MODULE, MODULE, Committed

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


# --- JavaScript, as in QuickCheckJsFunction (the image with both runtimes) ------------------


@pytest.fixture
def run_js_in_lambda(
    lambda_sandbox: LambdaSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> Callable[[str], CheckRecord]:
    def run(source: str) -> CheckRecord:
        committed = commit_files({"brand.json": BRAND, JS_MODULE: source})
        check = QuickCheckDef(name="p", module=JS_MODULE)
        return lambda_sandbox.run_check(committed.snapshot, check)

    return run


def test_a_javascript_check_passes_with_lambda_evidence(
    run_js_in_lambda: Callable[[str], CheckRecord],
) -> None:
    source = 'export default async (ctx) => ({ ok: (await ctx.read("brand.json")) !== null });\n'
    record = run_js_in_lambda(source)
    assert (record.outcome, record.platform, record.runtime) == (
        "passed",
        "aws-lambda",
        "dynamic-worker",
    )


def test_a_javascript_check_gets_no_environment_sockets_or_processes(
    run_js_in_lambda: Callable[[str], CheckRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    source = """\
export default async () => {
  const found = [typeof process, typeof require, typeof Buffer, typeof fetch];
  return { ok: false, message: found.join(",") };
};
"""
    record = run_js_in_lambda(source)
    assert record.message == "undefined,undefined,undefined,undefined"
    assert SECRET not in record.stdout.text + record.stderr.text
    # A dynamic import() is refused by its text, before the module runs (issue 28).
    record = run_js_in_lambda('export default async () => await import("node:fs");\n')
    assert record.outcome == "infrastructure-error"


def test_the_node_child_runs_under_the_seccomp_filter_and_rlimits() -> None:
    """What the launcher sets between fork and exec is what `node` runs under (observed from
    a node child that may still use fs, as the check's module never can)."""
    limits = node_limits(QUICK_SANDBOX)  # Node 24 needs more address space to start
    launcher = LambdaLauncher(node_runtime().executable, filter_program(), limits)
    program = ChildProgram(("-e", PROBE_NODE_CONFINEMENT), preamble=None, sets_own_limits=False)
    left, right = socket.socketpair()
    try:
        process = launcher.spawn(right.fileno(), program)
        stdout, _ = process.communicate(timeout=60)
    finally:
        left.close()
        right.close()
        launcher.cleanup()
    status = dict(line.split(":", 1) for line in stdout.decode().splitlines() if ":" in line)
    assert status["Seccomp"].strip() == "2"
    assert status["NoNewPrivs"].strip() == "1"
    assert status["as"].strip() == str(limits.address_space_bytes)
    assert status["socket"].strip() == "EPERM"


PROBE_NODE_CONFINEMENT = """
const fs = require("fs");
for (const line of fs.readFileSync("/proc/self/status", "utf8").split("\\n"))
  if (line.startsWith("Seccomp:") || line.startsWith("NoNewPrivs:")) console.log(line);
const limits = fs.readFileSync("/proc/self/limits", "utf8").split("\\n");
console.log("as:" + limits.find((line) => line.startsWith("Max address space")).split(/ +/)[3]);
const socket = require("net").connect(1, "127.0.0.1");
socket.on("error", (error) => console.log("socket:" + error.code));
"""
