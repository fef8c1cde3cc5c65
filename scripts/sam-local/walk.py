"""The API scenario over `sam local start-api`: the HTTP tests' walk, on the Lambda packaging.

The owner creates a project and an agent; the owner's initial import (with one quick check)
reaches canonical through the GitHttpFunction's own WSGI app, served here on loopback because
SAM's local HTTP API cannot carry git's binary request bodies; the agent forks, claims a
packet and requests a review; both read the state. The ReceiptRun that the review started in
(moto's) Step Functions is then driven by hand, step by step, with `sam local invoke`, as the
state machine would, and the receipt is read back through the API. The agent then pushes a
commit to its fork and has it reviewed; the owner approves and promotes it (202: a PromoteRun
execution in moto), and that execution is driven by hand the same way, the before-promote
ReceiptRun nested in it, until GET .../promotion answers 200 and canonical has moved.
Last, LogPublisherFunction's scheduled run publishes and self-checks the transparency log,
and the log, read through the API without a token, verifies from its files and key alone:
the project's entries are its gate's events, in order.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import boto3
from aws_local import free_loopback_port
from forkhorse.domain.log_entries import parse_entry
from forkhorse.tlog.verify import LogKey, all_entries, fetch_checkpoint
from forkhorse.wiring.aws import build_aws_service
from sam import Sam

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_URL = "https://sam-local.invalid"
QUICK_CHECK = "def check(ctx):\n    return {'ok': True, 'message': 'Quick check passed.'}\n"
QUICK_CHECK_JS = (
    'export default async (ctx) => ({ ok: (await ctx.read("README.md")) === "hello\\n" });\n'
)
WARM_SAMPLES = 10
CHECKS = (
    '[{"name":"quick","tier":"quick","module":".forkhorse/quick/ok.py"},'
    '{"name":"quick-js","tier":"quick","module":".forkhorse/quick/ok.js"}]\n'
)


@dataclass
class Client:
    base: str
    token: str

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)  # noqa: S310
        request.add_header("Authorization", f"Bearer {self.token}")
        if method != "GET":  # every mutating request is JSON, even without a body
            request.add_header("Content-Type", "application/json")
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        return status, json.loads(payload or b"null"), time.monotonic() - started

    def ok(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        status, payload, seconds = self.call(method, path, body)
        assert status == expect, (method, path, status, payload)
        print(f"sam-local: ok  {method} {path} -> {status} ({seconds:.2f} s)", flush=True)
        return payload


def walk(sam: Sam) -> dict[str, float]:
    """Walk the scenario; returns ApiFunction's request times (first cold, then warm)."""
    _, owner_token = build_aws_service().projects.create_principal("owner", "owner")
    with sam.start_api(free_loopback_port()) as base:
        owner = Client(base, owner_token)
        timings = api_function_timings(owner)
        project = owner.ok("POST", "/projects", {"name": "sam-local"}, expect=201)["project"]
        assert project["cloneUrl"].startswith(f"{PUBLIC_URL}/git/"), project
        push_initial_import(project["cloneUrl"], owner_token)
        agent_id, agent = new_agent(owner, project["id"])
        packet = owner.ok(
            "POST", f"/projects/{project['id']}/packets", {"title": "work"}, expect=201
        )["packet"]["id"]
        agent.ok("POST", f"/projects/{project['id']}/packets/{packet}/claim", expect=201)
        fork = agent.ok("POST", f"/projects/{project['id']}/forks", {"name": "a"}, expect=201)
        commit = fork["fork"]["head"]
        review_id = reviewed(sam, agent, project["id"], packet, fork["fork"]["id"], commit)
        state = agent.ok("GET", f"/projects/{project['id']}/state")
        assert [r["id"] for r in state["reviews"]] == [review_id], state
        assert state["reviews"][0]["commit"] == commit
        print(f"sam-local: agent {agent_id} reviewed {commit[:12]}: passed", flush=True)
        change = push_to_fork(fork["fork"]["cloneUrl"], agent.token)
        change_review = reviewed(sam, agent, project["id"], packet, fork["fork"]["id"], change)
        promote_by_hand(sam, owner, f"/projects/{project['id']}/reviews/{change_review}", change)
        head = owner.ok("GET", f"/projects/{project['id']}/state")["project"]["canonicalHead"]
        assert head == change, (head, change)
        print(f"sam-local: owner promoted {change[:12]} to canonical", flush=True)
        logged = published_log(sam, base, project["id"])
        assert logged == [
            ("settings", None),
            ("import", commit),
            ("receipt", commit),
            ("receipt", change),
            ("approval", change),
            ("receipt", change),  # the before-promote run's
            ("promotion", change),
        ], logged
    return timings


def reviewed(sam: Sam, agent: Client, project_id: str, packet: str, fork: str, commit: str) -> str:
    """The agent requests a review; its ReceiptRun, driven by hand, passes."""
    body = {"packetId": packet, "forkId": fork, "commit": commit}
    review = agent.ok("POST", f"/projects/{project_id}/reviews", body, expect=202)
    review_id: str = review["review"]["id"]
    run_receipt_by_hand(sam, _execution_input(review_id))
    summary = _review(agent.ok("GET", f"/projects/{project_id}/state"), review_id)
    assert summary["receipt"]["status"] == "passed", summary
    assert summary["receipt"]["checks"][0]["runtime"] == "dynamic-worker", summary
    return review_id


def api_function_timings(owner: Client) -> dict[str, float]:
    """GET /projects: the first request starts ApiFunction's container, the rest reuse it."""
    seconds = [owner.call("GET", "/projects")[2] for _ in range(WARM_SAMPLES + 1)]
    return {"cold": seconds[0], "warm": statistics.median(seconds[1:])}


def new_agent(owner: Client, project_id: str) -> tuple[str, Client]:
    created = owner.ok("POST", "/agents", {"name": "agent"}, expect=201)
    agent_id = created["agent"]["id"]
    owner.ok("POST", f"/projects/{project_id}/members", {"agentId": agent_id}, expect=201)
    return agent_id, Client(owner.base, created["token"])


def _review(state: dict[str, Any], review_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(r for r in state["reviews"] if r["id"] == review_id)
    return found


# --- git: the owner's initial import -------------------------------------------------------


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def git_http_app() -> Iterator[str]:
    """GitHttpFunction's WSGI app (its own `configure`), on loopback, against moto."""
    spec = importlib.util.spec_from_file_location(
        "git_http_app", ROOT / "functions/git_http/app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = make_server("127.0.0.1", 0, module.configure(), handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def push_initial_import(clone_url: str, token: str) -> None:
    files = {
        "README.md": "hello\n",
        ".forkhorse/checks": CHECKS,
        ".forkhorse/quick/ok.py": QUICK_CHECK,
        ".forkhorse/quick/ok.js": QUICK_CHECK_JS,
    }
    with git_http_app() as base, tempfile.TemporaryDirectory(prefix="sam-local-git-") as work:
        worktree = Path(work)
        _git(worktree, "init", "-q", "-b", "main")
        _commit(worktree, files, "initial import")
        _push(worktree, clone_url.replace(PUBLIC_URL, base), token)
    print("sam-local: ok  git push of the initial import to canonical", flush=True)


def push_to_fork(clone_url: str, token: str) -> str:
    """The agent's change on its fork, cloned and pushed over git's smart HTTP; its commit."""
    with git_http_app() as base, tempfile.TemporaryDirectory(prefix="sam-local-git-") as work:
        worktree = Path(work)
        url = clone_url.replace(PUBLIC_URL, base)
        _git(worktree, *_auth(token), "clone", "-q", url, ".")
        _commit(worktree, {"CHANGES.md": "The agent's change.\n"}, "the agent's change")
        _push(worktree, url, token)
        commit = _git(worktree, "rev-parse", "HEAD").strip()
    print(f"sam-local: ok  git push of {commit[:12]} to the agent's fork", flush=True)
    return commit


def _commit(worktree: Path, files: dict[str, str], message: str) -> None:
    for name, content in files.items():
        (worktree / name).parent.mkdir(parents=True, exist_ok=True)
        (worktree / name).write_text(content, encoding="utf-8")
    _git(worktree, "add", "-A")
    _git(worktree, "commit", "-q", "-m", message)


def _push(worktree: Path, url: str, token: str) -> None:
    _git(worktree, *_auth(token), "push", "-q", url, "HEAD:refs/heads/main")


def _auth(token: str) -> list[str]:
    basic = base64.b64encode(f"x:{token}".encode()).decode()
    return ["-c", f"http.extraHeader=Authorization: Basic {basic}"]


def _git(worktree: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=worktree, env=_git_env(worktree), check=True, capture_output=True
    )
    return done.stdout.decode()


def _git_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "Owner",
        "GIT_AUTHOR_EMAIL": "owner@forkhorse.invalid", "GIT_COMMITTER_NAME": "Owner",
        "GIT_COMMITTER_EMAIL": "owner@forkhorse.invalid",
    }  # fmt: skip


# --- the transparency log ---------------------------------------------------------------------


@dataclass
class HttpLog:
    """The log's files as anyone reads them: GET /log/<path>, no token."""

    base: str

    def read(self, path: str) -> bytes | None:
        request = urllib.request.Request(f"{self.base}/log/{path}")  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                return bytes(response.read())
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise


def published_log(sam: Sam, base: str, project_id: str) -> list[tuple[str, Any]]:
    """LogPublisherFunction's scheduled run through start-lambda, then the checkpoint and
    tiles through start-api, verified with the key /log/key serves; the project's entries
    as (kind, commit)."""
    schedule = json.loads((ROOT / "events/log_self_check.json").read_text(encoding="utf-8"))
    answer = _step(sam, "LogPublisherFunction", schedule)
    assert (answer["ok"], answer["published"]) == (True, answer["size"]), answer
    source = HttpLog(base)
    served = json.loads(source.read("key") or b"{}")
    checkpoint, _ = fetch_checkpoint(source, LogKey(served["origin"], served["publicKey"]))
    assert checkpoint.size == answer["size"], (checkpoint, answer)
    entries = [parse_entry(entry) for entry in all_entries(source, checkpoint)]
    print(f"sam-local: ok  GET /log/...: {checkpoint.size} entries verify", flush=True)
    return [(e.kind, e.subject.get("commit")) for e in entries if e.project == project_id]


# --- the ReceiptRun, step by step -----------------------------------------------------------


def _step(sam: Sam, function: str, event: dict[str, Any]) -> dict[str, Any]:
    result = sam.invoke_with(function, event)
    print(f"sam-local: ok  {function}: {json.dumps(result)[:100]}", flush=True)
    return result


def run_receipt_by_hand(sam: Sam, run: dict[str, Any]) -> None:
    """A ReceiptRun execution's input through each step Lambda in turn."""
    prepared = _step(sam, "PrepareFunction", run)
    assert (prepared["discovery"], prepared["quickCount"]) == ("checks", 2), prepared
    results = []
    for check in prepared["quick"]:
        dropped = _step(sam, quick_function(check), {"run": run["run"], "check": check})
        results.append(_step(sam, "QuickRecordFunction", dropped))
    assert [r["outcome"] for r in results] == ["passed", "passed"], results
    final = _step(
        sam, "FinalizeFunction", {**run, "prepared": prepared, "quick": results, "full": []}
    )
    assert (final["attached"], final["status"]) == (True, "passed"), (final, _items(run))


def quick_function(check: dict[str, Any]) -> str:
    """The state machine's QuickRuntime choice: the module's extension picks the function."""
    return "QuickCheckJsFunction" if check["module"].endswith(".js") else "QuickCheckFunction"


# --- the PromoteRun, step by step -----------------------------------------------------------


def promote_by_hand(sam: Sam, owner: Client, review_path: str, commit: str) -> None:
    """Approve and promote; then the PromoteRun execution's states, as the ASL orders them,
    the BeforePromoteRun's nested ReceiptRun included, until the promotion reads done."""
    owner.ok("POST", f"{review_path}/approve", {"commit": commit})
    pending = owner.ok("POST", f"{review_path}/promote", {"commit": commit}, expect=202)
    state = _promote_input(pending["promotion"]["id"])
    acquired = _step(sam, "PromoteAcquireFunction", state)
    assert acquired["required"] is True, acquired
    started = _step(sam, "PromoteStartRunFunction", acquired)
    assert started["run"]["trigger"] == "before-promote", started
    run_receipt_by_hand(sam, {"run": started["run"]})
    verified = _step(sam, "PromoteVerifyFunction", started)
    written = _step(sam, "PromoteWriteFunction", verified)
    assert written["outcome"] == "done", written
    _step(sam, "PromoteReleaseFunction", written)
    promotion = owner.ok("GET", f"{review_path}/promotion")["promotion"]
    assert (promotion["to"], promotion["digest"]) == (commit, verified["digest"]), promotion


def _promote_input(promotion_id: str) -> dict[str, Any]:
    """The input of the PromoteRun execution that the API started, named by the promotion."""
    machine = os.environ["PROMOTE_STATE_MACHINE_ARN"]
    arn = machine.replace(":stateMachine:", ":execution:") + f":{promotion_id}"
    described = boto3.client("stepfunctions").describe_execution(executionArn=arn)
    document: dict[str, Any] = json.loads(described["input"])
    return document


def _items(run: dict[str, Any]) -> list[dict[str, Any]]:
    """What attach compared against: the review's and its packet's claim items."""
    found: list[dict[str, Any]] = boto3.client("dynamodb").scan(TableName=os.environ["TABLE_NAME"])[
        "Items"
    ]
    return [item for item in found if "REVIEW" in json.dumps(item) or "CLAIM" in json.dumps(item)]


def _execution_input(review_id: str) -> dict[str, Any]:
    sfn = boto3.client("stepfunctions")
    executions = sfn.list_executions(stateMachineArn=os.environ["STATE_MACHINE_ARN"])
    for execution in executions["executions"]:
        described = sfn.describe_execution(executionArn=execution["executionArn"])
        document: dict[str, Any] = json.loads(described["input"])
        if document["run"]["reviewId"] == review_id:
            return document
    raise AssertionError(f"no ReceiptRun execution for review {review_id}")
