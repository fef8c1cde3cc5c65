"""The stock git CLI against a real `forkhorse serve` (issue 29): a shallow clone set up as the
README says (`forkhorse git-credential` recorded in the clone's config), `forkhorse submit`
from it to a passing receipt, deepening it (`--deepen`, `--shallow-since`, `--unshallow`),
later pulls and pushes with only the helper, and refusals that git prints as
`remote: <the sentence>`; with git's wire protocol 0 and 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from forkhorse.domain.git_access import CANONICAL_PROMOTE_ONLY
from forkhorse.domain.limits import GIT

from tests.e2e.client.support import PACKAGE_ROOT, Cli, Seen
from tests.integration.api.support import Client, Worktree, checks_files, git_env
from tests.support.serve import ServeProcess

# The README's clone: the helper, behind an empty entry that drops any other configured
# helper (one that might store the token), written into the clone's own configuration; the
# agent's PATH has `forkhorse` (the virtualenv's bin).
HELPER = "!forkhorse git-credential"
DAYS = 5


def agent_env(cli: Cli, protocol: str) -> dict[str, str]:
    """What an agent's shell has after `forkhorse login`: the service, no token in git;
    git's wire protocol pinned to `protocol`."""
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "protocol.version",
        "GIT_CONFIG_VALUE_0": protocol,
        **cli.env(),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": PACKAGE_ROOT,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Agent",
        "GIT_AUTHOR_EMAIL": "agent@forkhorse.invalid",
        "GIT_COMMITTER_NAME": "Agent",
        "GIT_COMMITTER_EMAIL": "agent@forkhorse.invalid",
    }


def run_git(
    env: dict[str, str], cwd: Path, *args: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if ok:
        assert done.returncode == 0, f"git {' '.join(args)}:\n{done.stderr}"
    return done


def import_history(base: Worktree, url: str, owner_token: str) -> None:
    """Canonical's initial import: DAYS commits, day n committed on 2026-10-(n+1)."""
    for day in range(DAYS):
        (base.path / f"day{day}.txt").write_text(f"{day}\n")
        date = f"2026-10-{day + 1:02d}T12:00:00Z"
        env = git_env(base.path, None) | {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        run_git(env, base.path, "add", "-A")
        run_git(env, base.path, "commit", "-q", "-m", f"day {day}")
    base.push(url, owner_token)


def depth(env: dict[str, str], work: Path) -> int:
    return int(run_git(env, work, "rev-list", "--count", "HEAD").stdout)


def test_a_shallow_clone_submits_deepens_and_keeps_its_credentials(
    serve: Callable[..., ServeProcess], tmp_path: Path
) -> None:
    process = serve()
    owner_token = (process.home / "owner-token").read_text().strip()
    owner = Client(process.url, owner_token)
    for protocol in ("0", "2"):
        body = {"name": f"shallow-v{protocol}", "requireReceipt": True}
        project = owner.ok("POST", "/projects", body, expect=201)["project"]
        project_id, canonical_url = project["id"], project["cloneUrl"]
        import_history(Worktree(tmp_path / f"import-v{protocol}"), canonical_url, owner_token)
        created = owner.ok("POST", "/agents", {"name": f"agent-v{protocol}"}, expect=201)
        token = created["token"]
        member = {"agentId": created["agent"]["id"]}
        owner.ok("POST", f"/projects/{project_id}/members", member, expect=201)
        packet = owner.ok("POST", f"/projects/{project_id}/packets", {"title": "w"}, expect=201)
        packet = packet["packet"]["id"]
        agent_home = tmp_path / f"agent-v{protocol}"
        agent_home.mkdir()
        cli = Cli(process.url, token, agent_home, Seen(), project_id)
        env = agent_env(cli, protocol)
        work = agent_home / "work"
        run_git(
            env,
            agent_home,
            "clone",
            "-q",
            "--depth",
            "1",
            "-c",
            "credential.helper=",
            "-c",
            f"credential.helper={HELPER}",
            canonical_url,
            str(work),
        )
        assert depth(env, work) == 1
        config = (work / ".git" / "config").read_text()
        assert token not in config
        assert "git-credential" in config

        # Commit, then submit from the shallow checkout: fork, claim, push, review, receipt.
        for name, content in checks_files().items():  # a quick check only
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(content)
        run_git(env, work, "add", "-A")
        run_git(env, work, "commit", "-q", "-m", "quick check")
        commit = run_git(env, work, "rev-parse", "HEAD").stdout.strip()
        ran = cli.run("submit", "--packet", packet, "--json", cwd=work)
        assert ran.code == 0, ran.stderr
        assert (ran.json()["status"], ran.json()["commit"]) == ("passed", commit)

        # Deepen it, by count, by date and whole, with only the helper for credentials.
        run_git(env, work, "fetch", "-q", "--deepen=1", "origin")
        assert depth(env, work) == 3  # the new commit, the clone's and one more
        run_git(env, work, "fetch", "-q", "--shallow-since=2026-10-03T00:00:00Z", "origin")
        assert depth(env, work) == 4  # days 2, 3 and 4, and the new commit
        run_git(env, work, "fetch", "-q", "--unshallow", "origin")
        assert depth(env, work) == DAYS + 1
        assert not (work / ".git" / "shallow").exists()
        run_git(env, work, "pull", "-q", "--ff-only", "origin", "main")

        # A later push to the fork, with only the helper.
        [fork] = owner.state(project_id)["forks"]
        (work / "more.txt").write_text("more\n")
        run_git(env, work, "add", "-A")
        run_git(env, work, "commit", "-q", "-m", "more")
        run_git(env, work, "push", "-q", fork["cloneUrl"], "HEAD:refs/heads/main")
        later = run_git(env, work, "rev-parse", "HEAD").stdout.strip()
        assert [f["head"] for f in owner.state(project_id)["forks"]] == [later]

        # Refusals git prints as `remote: <the sentence>`: a repository the agent cannot write,
        # and a push over a limit (refs per push).
        refused = run_git(env, work, "push", canonical_url, "HEAD:refs/heads/x", ok=False)
        assert refused.returncode != 0
        assert f"remote: {CANONICAL_PROMOTE_ONLY}" in refused.stderr, refused.stderr
        many = [f"HEAD:refs/heads/b{n}" for n in range(GIT.ref_updates + 1)]
        refused = run_git(env, work, "push", fork["cloneUrl"], *many, ok=False)
        assert refused.returncode != 0
        limit = f"the limit is {GIT.ref_updates} per push"
        assert any(
            line.startswith("remote: ") and limit in line for line in refused.stderr.splitlines()
        ), refused.stderr
