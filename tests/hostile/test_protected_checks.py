"""Issue 28, protected checks through the tools' own configuration: with `protectChecks` on in
required mode, an agent neutralises a check without touching `.forkhorse/checks`, its module
or any test, by changing what the check's runner reads from the checkout (`.npmrc` with
`script-shell=/bin/true` turns every `npm test` into a pass). Each such path is part of the
check: approve answers `checks-changed` naming the path and the check, and nothing lands on
canonical until the owner accepts exactly that change.

A live server on loopback, real pushes with the git CLI, real quick checks (bubblewrap) and
real full checks (podman, busybox image). The busybox image has no npm, python or make: a
check that calls one fails, which adds a `failed` reason beside the one under test, so the
cases that must land use a vendored shim (`sh bin/npm test`: the runner is still `npm`).
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from forkhorse.domain.limits import PROTECTS
from forkhorse.service.approvals import GATE_REFUSED
from forkhorse.service.promote.rules import CONSENT_MISSING

from tests.integration.api.support import QUICK_OK, git_env
from tests.support.live import Lane, Project, Server, new_lane

NPM_TEST = '{"name":"unit","tier":"full","image":"busybox","run":"npm test"}'
# A stand-in for npm that passes: the busybox image has none. The runner word is still npm.
NPM_SHIM = '{"name":"unit","tier":"full","image":"busybox","run":"sh bin/npm test"}'
NPM_SHIM_FILES = {"bin/npm": "#!/bin/sh\nexit 0\n", "package.json": '{"scripts":{"test":"t"}}\n'}
NEUTRALISED = "script-shell=/bin/true\n"


def _project(server: Server, checks: list[str], files: dict[str, str]) -> Project:
    """A required-mode project whose canonical head declares `checks`, with the policy on."""
    body = {"name": "protected", "requireReceipt": True}
    project = server.owner.ok("POST", "/projects", body, expect=201)["project"]
    base = server.worktree()
    checks_file = {".forkhorse/checks": "[" + ",".join(checks) + "]\n"}
    initial = base.commit({**checks_file, "README.md": "hi\n", **files}, "import")
    base.push(project["cloneUrl"], server.owner_token)
    wanted = {"protectChecks": True}
    assert server.owner.ok("PUT", f"/projects/{project['id']}/policy", wanted) == {"policy": wanted}
    return Project(server, project["id"], project["cloneUrl"], base, initial)


def _checks_changed(reasons: list[str]) -> list[str]:
    return [reason for reason in reasons if reason.startswith("checks-changed:")]


def _reviewed(lane: Lane, files: dict[str, str]) -> tuple[str, dict[str, Any]]:
    commit, review = lane.reviewed(files)
    assert review["receipt"]["status"] != "running", review["receipt"]
    return commit, review


def test_npmrc_script_shell_is_a_checks_change_of_npm_test(server: Server) -> None:
    """The issue's exact attack, against the literal `npm test`: only `.npmrc` is added."""
    project = _project(server, [NPM_TEST], {"package.json": '{"scripts":{"test":"t"}}\n'})
    lane = new_lane(project)
    commit, review = _reviewed(lane, {".npmrc": NEUTRALISED, "src.txt": "work\n"})

    expected = ["checks-changed: .npmrc (protected by check 'unit') was added."]
    status, refused = project.approve(review["id"], commit)
    assert (status, refused["error"]) == (409, GATE_REFUSED)
    assert _checks_changed(refused["reasons"]) == expected
    gate = server.owner.ok("GET", f"{project.review_path(review['id'])}/gate")
    assert _checks_changed(gate["approve"]["reasons"]) == expected
    [shown] = gate["checks"]["diff"]
    assert (shown["check"], shown["change"], shown["protected"]) == ("unit", "changed", True)

    status, body = server.owner.promote(project.id, review["id"], commit)
    assert (status, body["error"]) == (409, CONSENT_MISSING)
    # Accepting answers this reason; the busybox image has no npm, so the run failed.
    status, accepted = project.approve(review["id"], commit, True)
    assert status == 409, accepted
    assert _checks_changed(accepted["reasons"]) == []
    assert server.owner.state(project.id)["project"]["canonicalHead"] == project.initial


def test_a_neutralised_npm_check_lands_only_once_the_owner_accepts_it(server: Server) -> None:
    project = _project(server, [NPM_SHIM], NPM_SHIM_FILES)
    lane = new_lane(project)
    commit, review = _reviewed(lane, {".npmrc": NEUTRALISED, "src.txt": "work\n"})
    assert review["receipt"]["status"] == "passed", review["receipt"]

    reason = "checks-changed: .npmrc (protected by check 'unit') was added."
    approved = project.refused_until_accepted(review["id"], commit, [reason])
    [accepted] = approved["approval"]["acceptedChecksChange"]
    assert (accepted["check"], accepted["change"]) == ("unit", "changed")
    assert accepted["before"] != accepted["after"]
    status, promoted = server.owner.promote(project.id, review["id"], commit)
    assert status == 200, promoted
    state = server.owner.state(project.id)
    assert state["project"]["canonicalHead"] == commit
    assert state["ledger"][-1]["acceptedChecksChange"] == [accepted]


def test_the_code_under_review_is_not_the_check(server: Server) -> None:
    """Tests and sources are what the review is about: changing them needs no acceptance."""
    project = _project(server, [NPM_SHIM], NPM_SHIM_FILES)
    lane = new_lane(project)
    files = {"test/unit.test.js": "// weaker test\n", "src/index.js": "export {};\n"}
    commit, review = _reviewed(lane, files)
    assert review["receipt"]["status"] == "passed", review["receipt"]
    status, approved = project.approve(review["id"], commit)
    assert status == 200, approved
    assert approved["approval"]["acceptedChecksChange"] == []


QUICK_WITH_PROTECTS = (
    '{"name":"lint","tier":"quick","module":".forkhorse/quick/ok.py","protects":["ci/*.env"]}'
)


@pytest.mark.parametrize(
    ("checks", "canonical", "pushed", "reason"),
    [
        pytest.param(
            ['{"name":"py","tier":"full","image":"busybox","run":"python3 -m pytest -q"}'],
            {"pyproject.toml": "[project]\nname = 'p'\n"},
            {"tests/unit/conftest.py": "collect_ignore_glob = ['*']\n"},
            "checks-changed: tests/unit/conftest.py (protected by check 'py') was added.",
            id="conftest-at-any-depth",
        ),
        pytest.param(
            ['{"name":"mk","tier":"full","image":"busybox","run":"make test"}'],
            {"Makefile": "test:\n\t./run-tests\n"},
            {"Makefile": "test:\n\ttrue\n"},
            "checks-changed: Makefile (protected by check 'mk') changed.",
            id="makefile",
        ),
        pytest.param(
            [QUICK_WITH_PROTECTS],
            {".forkhorse/quick/ok.py": QUICK_OK, "ci/test.env": "STRICT=1\n"},
            {"ci/test.env": "STRICT=0\n"},
            "checks-changed: ci/test.env (protected by check 'lint') changed.",
            id="declared-glob",
        ),
    ],
)
def test_each_runners_configuration_is_part_of_its_check(
    server: Server,
    checks: list[str],
    canonical: dict[str, str],
    pushed: dict[str, str],
    reason: str,
) -> None:
    project = _project(server, checks, canonical)
    lane = new_lane(project)
    commit, review = _reviewed(lane, {**pushed, "src.txt": "work\n"})

    status, refused = project.approve(review["id"], commit)
    assert (status, refused["error"]) == (409, GATE_REFUSED)
    assert _checks_changed(refused["reasons"]) == [reason]
    status, body = server.owner.promote(project.id, review["id"], commit)
    assert (status, body["error"]) == (409, CONSENT_MISSING)

    status, accepted = project.approve(review["id"], commit, True)
    if review["receipt"]["status"] == "passed":
        assert status == 200, accepted
        status, promoted = server.owner.promote(project.id, review["id"], commit)
        assert status == 200, promoted
    else:  # the busybox image lacks the runner: only the failed run is left to refuse
        assert status == 409, accepted
        assert _checks_changed(accepted["reasons"]) == []


def test_a_removed_protected_file_is_named(server: Server) -> None:
    project = _project(server, [NPM_SHIM], {**NPM_SHIM_FILES, "package-lock.json": "{}\n"})
    lane = new_lane(project)
    lane.tree.git(None, "rm", "-q", "package-lock.json")
    commit, review = _reviewed(lane, {"src.txt": "work\n"})
    status, refused = project.approve(review["id"], commit)
    assert (status, refused["reasons"]) == (
        409,
        ["checks-changed: package-lock.json (protected by check 'unit') was removed."],
    )


def _git(lane: Lane, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=lane.tree.path,
        env=git_env(lane.tree.path, None),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.parametrize("glob", ["**/conftest.py", "ci/*.env"])
def test_a_tree_bomb_is_compared_boundedly(server: Server, glob: str) -> None:
    """A commit whose tree expands to about 10,000 x 10,000 paths from three objects. A glob
    that may match anywhere makes the comparison read until its entry budget, and the check
    counts as changed (uncompared); an anchored glob never enters the bomb's directories."""
    check = QUICK_WITH_PROTECTS.replace("ci/*.env", glob)
    project = _project(server, [check], {".forkhorse/quick/ok.py": QUICK_OK})
    lane = new_lane(project)
    blob = _git(lane, "hash-object", "-w", "--stdin", stdin="x\n")
    wide = 10_000
    leaf = _git(lane, "mktree", stdin="".join(f"100644 blob {blob}\tf{i}\n" for i in range(wide)))
    root = _git(lane, "ls-tree", "HEAD") + "\n"
    root += "".join(f"040000 tree {leaf}\td{i}\n" for i in range(wide - 16))
    tree = _git(lane, "mktree", stdin=root)
    commit = _git(lane, "commit-tree", tree, "-p", "HEAD", "-m", "bomb")
    _git(lane, "update-ref", "HEAD", commit)
    assert lane.agent.token is not None
    lane.tree.push(lane.fork["cloneUrl"], lane.agent.token)
    review = lane.request_review(commit)
    receipt = server.owner.wait_receipt(project.id, review["id"])
    assert receipt["receipt"]["status"] == "passed", receipt["receipt"]

    started = time.monotonic()
    status, answer = project.approve(review["id"], commit)
    elapsed = time.monotonic() - started
    # Reading every path would take hours; the budget reads a few trees.
    assert elapsed < 10, elapsed
    if glob == "ci/*.env":
        assert status == 200, answer
        return
    assert (status, len(answer["reasons"])) == (409, 1), answer
    assert answer["reasons"][0].startswith(
        "checks-changed: The paths protected by check 'lint' could not be compared with "
        f"canonical's (the trees differ in more than {PROTECTS.compared_entries:,} entries"
    )
    status, approved = project.approve(review["id"], commit, True)
    assert status == 200, approved
