"""`forkhorse verify-log` over a directory of log files and a real git repository: a chain
the log explains holds (exit 0); a commit it does not explain, a missing approval, an entry
asked for that is not there are findings (exit 1); a log that goes back on what this verifier
saw is refused (exit 4); a missing or wrong key is a usage error (exit 3). Canonical's walk
(client/git_history.py) is bounded and tells a stale clone from a bypass."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from forkhorse.client.errors import UsageError
from forkhorse.client.git_history import GitHistory, open_history
from forkhorse.domain.log_entries import (
    ApprovalSubject,
    ImportSubject,
    PromotionSubject,
    ReceiptSubject,
    SettingsSubject,
    facts_digest,
    make_entry,
)

from tests.support.served_log import ServedLog, key_body
from tests.support.transparency import Cli

PROJECT = "p1"
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@forkhorse.invalid",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@forkhorse.invalid",
}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | GIT_ENV | {"HOME": str(repo)},
    )
    return done.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


type Subject = ReceiptSubject | ApprovalSubject | PromotionSubject | SettingsSubject | ImportSubject


def _entry(subject: Subject, key: str) -> bytes:
    return make_entry(PROJECT, subject, facts_digest(subject), key).to_bytes()


def _promoted(commit: str, previous: str, n: int, approved: bool = True) -> list[bytes]:
    receipt = ReceiptSubject(commit=commit, review=f"r{n}", record="a" * 64, status="passed",
                             mocked=False)  # fmt: skip
    approval = ApprovalSubject(commit=commit, review=f"r{n}", require_receipt=True,
                               accepted_checks_change=())  # fmt: skip
    promotion = PromotionSubject(commit=commit, review=f"r{n}", promotion=f"m{n}",
                                 previous=previous, mode="required")  # fmt: skip
    chain = [_entry(receipt, f"receipt/{n}")]
    if approved:
        chain.append(_entry(approval, f"approval/{n}"))
    return [*chain, _entry(promotion, f"promotion/{n}")]


@dataclass
class World:
    log: ServedLog
    repo: Path
    key: Path
    cli: Cli
    commits: list[str]

    def verify(self, *extra: str) -> tuple[int, Any]:
        ran = self.cli.run(
            "verify-log", "--log", str(self.log.files.root), "--key", str(self.key),
            "--project", PROJECT, "--repo", str(self.repo), "--json", *extra,
        )  # fmt: skip
        return ran.code, ran.json()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    repo = tmp_path / "canonical"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    imported = _commit(repo, "import")
    first = _commit(repo, "first")
    log = ServedLog.create(tmp_path / "server")
    settings = SettingsSubject(require_receipt=True)
    log.append_entries(
        [
            _entry(settings, "settings/1"),
            _entry(ImportSubject(commit=imported), f"import/{PROJECT}"),
            *_promoted(first, imported, 1),
        ]
    )
    key = tmp_path / "key.json"
    key.write_text(json.dumps(key_body(log.key)))
    yield World(log, repo, key, Cli(tmp_path / "verifier"), [imported, first])
    log.close()


def test_a_chain_the_log_explains_holds(world: World) -> None:
    code, report = world.verify("--promotion", "m1", "--entry", "0")
    assert code == 0, report
    [project] = report["projects"]
    assert project["promotions"] == 1
    assert project["tip"] == world.commits[1]
    assert [e["index"] for e in report["included"]] == [0, 4]


def test_a_commit_the_log_does_not_explain_is_named(world: World) -> None:
    bypass = _commit(world.repo, "straight to canonical")
    code, report = world.verify()
    assert code == 1
    [finding] = report["projects"][0]["findings"]
    assert finding["commits"] == [bypass]


def test_a_promotion_without_its_approval_is_a_finding(world: World) -> None:
    second = _commit(world.repo, "second")
    world.log.append_entries(_promoted(second, world.commits[1], 2, approved=False))
    code, report = world.verify()
    assert code == 1
    messages = [f["message"] for f in report["projects"][0]["findings"]]
    assert messages == [f"promotion m2 (entry 6) has no approval of {second} before it"]


def test_entries_asked_for_that_are_not_there_are_findings(world: World) -> None:
    code, report = world.verify("--entry", "99", "--commit", "f" * 40)
    assert code == 1
    assert [f["message"] for f in report["findings"]] == [
        "entry 99 is not a log entry of the tree of size 5",
        f"no entry of the log names commit {'f' * 40}",
    ]


def test_a_log_that_goes_back_on_what_the_verifier_saw_is_refused(
    world: World, tmp_path: Path
) -> None:
    state = tmp_path / "seen.json"
    older = world.log.note()
    world.log.append(2)
    assert world.verify("--state", str(state))[0] == 0
    (world.log.files.root / "checkpoint").write_text(older)
    code, report = world.verify("--state", str(state))
    assert code == 4
    assert "rollback" in str(report["refused"])
    assert report["previous"] == {
        "size": 7,
        "root": report["previous"]["root"],
        "from": str(state),
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "No key for the log"),
        (("--key", "{pem}"), "is a PEM: pass --origin"),
        (("--key", "{key}", "--origin", "other"), "not 'other'"),
        (("--key", "{key}", "--repo", "{repo}"), "Name the project"),
        (("--key", "{key}", "--project", "p", "--repo", "{nowhere}"), "not a git repository"),
    ],
)
def test_what_cannot_be_verified_as_asked_is_a_usage_error(
    world: World, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    pem = tmp_path / "key.pem"
    pem.write_text(world.log.key.public_pem)
    paths = {"pem": pem, "key": world.key, "repo": world.repo, "nowhere": tmp_path / "nowhere"}
    argv = [arg.format(**paths) for arg in args]
    ran = world.cli.run("verify-log", "--log", str(world.log.files.root), *argv)
    assert ran.code == 3, ran.stdout + ran.stderr
    assert message in ran.stderr


def test_a_pem_key_with_its_origin_verifies(world: World, tmp_path: Path) -> None:
    pem = tmp_path / "key.pem"
    pem.write_text(world.log.key.public_pem)
    ran = world.cli.run(
        "verify-log", "--log", str(world.log.files.root), "--key", str(pem),
        "--origin", world.log.origin,
    )  # fmt: skip
    assert ran.code == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[-1] == "all holds"


def test_the_walk_is_bounded_and_a_stale_clone_is_told_apart(world: World) -> None:
    for n in range(5):
        _commit(world.repo, f"c{n}")
    history = GitHistory(world.repo, "refs/heads/main", limit=3)
    assert len(history.first_parent(None, history.tip() or "")) == 3
    assert history.truncated
    missing = "e" * 40
    assert not history.is_ancestor(missing, world.commits[0])
    assert history.missing == {missing}
    with pytest.raises(UsageError, match="has no refs/heads/trunk"):
        open_history(world.repo, "refs/heads/trunk")
    with pytest.raises(UsageError, match="not a ref"):
        open_history(world.repo, "--upload-pack=evil")
