"""The client CLI as agents and owners run it, against a live Forkhorse on loopback with
real git pushes, real bubblewrap quick checks and real podman full checks."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

from forkhorse.domain.receipts import SKIPPED_FULL_MESSAGE

from tests.e2e.client.conftest import AgentSeat, seat
from tests.e2e.client.support import Cli, Seen
from tests.integration.api.support import FAILING, PASSING, checks_files
from tests.support.live import CLAIM_TTL, Project, Server

CHECKS_FAILED = "Checks failed before promote."
FLOW_RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}
FAILING_QUICK = "def check(ctx):\n    return {'ok': False, 'message': 'Not yet.'}\n"


def _submit(agent: AgentSeat, *extra: str) -> tuple[int, dict[str, object]]:
    ran = agent.cli.run(
        "submit", "--packet", agent.packet, "--json", *extra, cwd=agent.checkout.path
    )
    return ran.code, ran.json()


def test_an_agent_submits_and_the_owner_approves_and_promotes(
    server: Server, required: Project, owner_cli: Cli, agent_home: Path, seen: Seen
) -> None:
    agent = seat(server, required, agent_home, seen, "cli-agent")
    commit = agent.checkout.commit(PASSING, "passing checks")

    ran = agent.cli.run("submit", "--packet", agent.packet, cwd=agent.checkout.path)
    assert ran.code == 0, ran.stderr
    review = ran.stderr.split("review ", 1)[1].split(":", 1)[0]
    # One line as each check starts and as it ends, then the outcome, digest and link.
    assert "  quick (quick/dynamic-worker): started" in ran.stderr
    assert "  quick (quick/dynamic-worker): passed" in ran.stderr
    assert "  full-0 (full/container): passed" in ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == f"passed  review {review}"
    assert re.fullmatch(r"digest  [0-9a-f]{64}", lines[1])
    assert lines[2] == f"console {server.url}/#/p/{required.id}/r/{review}"

    # The fork holds the exact commit; the checkout's config holds no remote or secret.
    state = server.owner.state(required.id)
    assert [fork["head"] for fork in state["forks"]] == [commit]
    assert "url" not in (agent.checkout.path / ".git/config").read_text()

    waited = agent.cli.run("wait", review, "--json")
    assert waited.code == 0, waited.stderr
    summary = waited.json()
    assert set(summary) == {
        "commit",
        "project",
        "review",
        "status",
        "exitCode",
        "digest",
        "console",
        "receipt",
    }
    assert (summary["status"], summary["exitCode"], summary["commit"]) == ("passed", 0, commit)
    assert summary["receipt"]["trigger"] == "review-created"
    assert [c["outcome"] for c in summary["receipt"]["checks"]] == ["passed", "passed"]

    receipt_file = agent_home / "review.json"
    receipt_file.write_text(json.dumps(FLOW_RECEIPT))
    attached = agent.cli.run("review-receipts", "attach", review, str(receipt_file), "--json")
    assert attached.code == 0, attached.stderr
    assert set(attached.json()) == {"digest", "classification"}

    status = agent.cli.run("status", "--json")
    assert status.code == 0, status.stderr
    assert [r["id"] for r in status.json()["reviews"]] == [review]

    # The owner finds the review's project by itself.
    projects = owner_cli.run("projects", "--json")
    assert required.id in [p["id"] for p in projects.json()["projects"]]
    gate = owner_cli.run("gate", review, "--json")
    assert gate.code == 0, gate.stdout
    assert gate.json()["approve"] == {"allowed": True, "reasons": []}
    approved = owner_cli.run("approve", review, "--json")
    assert approved.code == 0, approved.stdout
    assert approved.json()["approval"]["commit"] == commit
    assert approved.json()["approval"]["mode"] == "required"

    promoted = owner_cli.run("promote", review)
    assert promoted.code == 0, promoted.stderr
    # The fresh before-promote run is followed with the same display.
    assert "  full-0 (full/container): passed" in promoted.stderr
    lines = promoted.stdout.splitlines()
    assert lines[0] == f"promoted {required.initial} -> {commit}"
    # The promotion's id and the links to its ledger entry and its signed VSA.
    [entry] = server.owner.state(required.id)["ledger"][-1:]
    pid, base = entry["promotionId"], f"{server.url}/projects/{required.id}"
    assert lines[2:] == [
        f"promotion {pid}",
        f"attestation  {base}/promotions/{pid}/attestation",
        f"ledger  {base}/ledger/{pid}",
    ]
    assert server.owner.state(required.id)["project"]["canonicalHead"] == commit


def test_an_agent_with_only_the_url_and_its_token_finds_its_projects_and_packets(
    server: Server, required: Project, agent_home: Path, seen: Seen
) -> None:
    agent, agent_id = required.agent("finder")
    assert agent.token is not None
    cli = Cli(server.url, agent.token, agent_home, seen)  # no project configured
    projects = cli.run("projects", "--json")
    assert projects.code == 0, projects.stderr
    assert [p["id"] for p in projects.json()["projects"]] == [required.id]
    listed = cli.run("projects")
    assert listed.stdout.startswith(f"{required.id}  ")
    free = required.packet("find me")
    packets = cli.run("packets", required.id, "--json")
    assert packets.code == 0, packets.stderr
    page = packets.json()
    assert page["next"] is None
    assert {"id": free, "title": "find me", "claim": None} in page["packets"]
    claimed = cli.run("packets", required.id, "--limit", "1")
    assert claimed.code == 0, claimed.stderr
    assert len(claimed.stdout.splitlines()) <= 2
    path = f"/projects/{required.id}/packets/{free}/claim"
    agent.ok("POST", path, expect=201)
    text = cli.run("packets", "--project", required.id).stdout
    assert f"{free}  find me  claimed by {agent_id} until " in text
    agent.ok("DELETE", path)
    # An agent of no project lists none; a project it is not in is the service's refusal.
    outsider = server.owner.ok("POST", "/agents", {"name": "outsider"}, expect=201)
    lonely = Cli(server.url, outsider["token"], agent_home, seen)
    assert lonely.run("projects", "--json").json() == {"projects": []}
    refused = lonely.run("packets", required.id)
    assert refused.code == 3
    assert refused.stderr == "error: This agent is not a member of the project.\n"


def test_a_failing_quick_check_exits_1_and_starts_no_container(
    server: Server, required: Project, agent_home: Path, seen: Seen
) -> None:
    agent = seat(server, required, agent_home, seen, "quick-fails")
    files = checks_files("true") | {".forkhorse/quick/ok.py": FAILING_QUICK}
    agent.checkout.commit(files, "a failing quick check")
    code, summary = _submit(agent)
    assert code == 1
    assert (summary["status"], summary["exitCode"]) == ("failed", 1)
    checks = summary["receipt"]["checks"]  # type: ignore[index]
    assert [(c["name"], c["outcome"]) for c in checks] == [
        ("quick", "failed"),
        ("full-0", "failed"),
    ]
    # The full check never ran: skipped before any container or snapshot URL.
    assert checks[1]["message"] == SKIPPED_FULL_MESSAGE
    assert checks[1]["durationMs"] is None


def test_an_expired_claim_taken_by_another_agent_is_a_usage_error(
    server: Server, required: Project, agent_home: Path, seen: Seen
) -> None:
    first = seat(server, required, agent_home, seen, "slow-agent")
    first.checkout.commit(checks_files(), "quick only")
    code, summary = _submit(first)
    assert code == 0, summary
    server.clock.offset = CLAIM_TTL + timedelta(minutes=1)
    try:
        other, _ = required.agent("fast-agent")
        path = f"/projects/{required.id}/packets/{first.packet}/claim"
        other.ok("POST", path, expect=201)
        ran = first.cli.run("submit", "--packet", first.packet, cwd=first.checkout.path)
        assert ran.code == 3
        assert ran.stderr == "error: Another agent holds a live claim on this packet.\n"
    finally:
        server.clock.offset = timedelta()


def test_a_wrong_token_is_a_usage_error_with_the_services_sentence(
    server: Server, required: Project, owner_cli: Cli
) -> None:
    ran = owner_cli.run("status", "--project", required.id, env={"FORKHORSE_TOKEN": "not-a-token"})
    assert ran.code == 3
    assert ran.stderr.startswith("error: ")
    as_json = owner_cli.run("projects", "--json", env={"FORKHORSE_TOKEN": "not-a-token"})
    assert as_json.code == 3
    assert as_json.json()["status"] == 401
    assert "not-a-token" not in ran.stderr + as_json.stdout
    missing = owner_cli.run("projects", env={"FORKHORSE_TOKEN": ""})
    assert (missing.code, missing.stderr) == (
        3,
        "error: No token: pass --token-file, set FORKHORSE_TOKEN or run `forkhorse login`.\n",
    )


def test_promote_answers_the_exact_409_when_the_fresh_run_fails(
    server: Server, advisory: Project, owner_cli: Cli, agent_home: Path, seen: Seen
) -> None:
    agent = seat(server, advisory, agent_home, seen, "failing")
    commit = agent.checkout.commit(FAILING, "a failing full check")
    code, summary = _submit(agent)
    assert (code, summary["status"]) == (1, "failed")
    review = str(summary["review"])
    owner_cli.project = advisory.id
    assert owner_cli.run("approve", review).code == 0  # advisory: consent on any receipt
    settings = owner_cli.run("settings", "--require-receipt", "on", "--json")
    assert (settings.code, settings.json()) == (0, {"settings": {"requireReceipt": True}})

    promoted = owner_cli.run("promote", review)
    assert promoted.code == 1
    assert promoted.stderr.endswith(f"error: {CHECKS_FAILED}\n")
    assert "  full-0 (full/container): failed" in promoted.stderr
    as_json = owner_cli.run("promote", review, "--commit", commit, "--json")
    assert as_json.code == 1
    assert as_json.json() == {"error": CHECKS_FAILED, "status": 409, "exitCode": 1}
    assert server.owner.state(advisory.id)["project"]["canonicalHead"] == advisory.initial


SLOW_QUICK = (
    "import time\n\n"
    "def check(ctx):\n    time.sleep(6)\n    return {'ok': True, 'message': 'Slow.'}\n"
)


def test_a_wait_that_runs_out_exits_2(
    server: Server, required: Project, agent_home: Path, seen: Seen
) -> None:
    agent = seat(server, required, agent_home, seen, "impatient")
    agent.checkout.commit(checks_files() | {".forkhorse/quick/ok.py": SLOW_QUICK}, "slow")
    ran = agent.cli.run(
        "submit", "--packet", agent.packet, "--timeout", "0.5", cwd=agent.checkout.path
    )
    assert ran.code == 2
    assert "error: The receipt was still running after 0.5 s.\n" in ran.stderr
    review = ran.stderr.split("review ", 1)[1].split(":", 1)[0]
    assert ran.stderr.splitlines()[-1].startswith(f"  follow it: forkhorse wait {review}")
    waited = agent.cli.run("wait", review, "--json")
    assert (waited.code, waited.json()["status"]) == (0, "passed")
