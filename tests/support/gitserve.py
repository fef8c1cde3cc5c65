"""Git fixtures: real git repos, both GitStore adapters and the smart-HTTP app on loopback."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from dulwich.repo import Repo
from forkhorse.adapters.events import InProcessEventBus
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.adapters.git.store import DulwichGitStore
from forkhorse.domain.git_access import GitPrincipal, RepoFacts, mint_canonical_write_capability
from forkhorse.githttp.http import GitHttpApp

from tests.support.aws import create_table_from_template
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.wsgi import LoopbackWsgi

PROJECT = "proj"
BUCKET = "forkhorse-git"


def git(*args: str, cwd: Path, check: bool = True, home: Path | None = None) -> str:
    """Run the git CLI with no user or system configuration and no prompts."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home or cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Tester",
        "GIT_AUTHOR_EMAIL": "tester@example.com",
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.com",
        "GIT_AUTHOR_DATE": "2026-10-12T16:55:00Z",
        "GIT_COMMITTER_DATE": "2026-10-12T16:55:00Z",
    }
    result = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout.strip() + result.stderr.strip() if not check else result.stdout.strip()


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    return path


def commit_all(repo: Path, message: str = "commit") -> str:
    git("add", "-A", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def write_files(repo: Path, files: dict[str, bytes | str]) -> None:
    for name, content in files.items():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)


def import_objects(store: DulwichGitStore, source: Path) -> None:
    """Copy every object of a local repository into the store (as one new pack)."""
    with Repo(str(source)) as repo:
        objects = [(repo.object_store[sha], None) for sha in repo.object_store]
    store.objects.add_objects(objects)


def import_as_canonical(store: DulwichGitStore, source: Path, commit: str) -> None:
    """Seed canonical as the promote path would (tests may mint the capability)."""
    if not store.exists():
        store.create_canonical()
    import_objects(store, source)
    capability = mint_canonical_write_capability(store.project)
    assert store.update_canonical_ref(capability, "refs/heads/main", store.head(), commit)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def s3_host(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3GitHost]:
    with atomic_mock_aws(monkeypatch):
        # SigV4 presigning, as the Lambda wiring must configure: the URL carries its 180 s.
        s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
        s3.create_bucket(Bucket=BUCKET)
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        table = create_table_from_template(dynamodb)
        yield S3GitHost(s3, dynamodb, BUCKET, table)


@pytest.fixture(params=["disk", "s3"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Both GitStore adapters: the conformance suite runs once against each."""
    if request.param == "disk":
        return DiskGitHost(tmp_path / "state")
    return request.getfixturevalue("s3_host")


@dataclass
class Directory:
    """Tokens and repository facts, as the API will later provide them from the Store."""

    tokens: dict[str, GitPrincipal] = field(default_factory=dict)
    owner: str = "owner-1"
    members: set[str] = field(default_factory=set)
    forks: dict[str, str] = field(default_factory=dict)

    def resolve(self, token: str) -> GitPrincipal | None:
        return self.tokens.get(token)

    def lookup(self, project: str, fork: str | None) -> RepoFacts | None:
        if project != PROJECT:
            return None
        fork_owner = self.forks.get(fork) if fork is not None else None
        return RepoFacts(owner=self.owner, members=frozenset(self.members), fork_owner=fork_owner)


@dataclass
class Served:
    url: str
    host: DiskGitHost
    events: InProcessEventBus
    directory: Directory

    def remote(self, token: str, fork: str | None = None, project: str = PROJECT) -> str:
        repo = "canonical" if fork is None else f"forks/{fork}"
        return f"{self.url.replace('://', f'://any:{token}@')}/git/{project}/{repo}.git"

    @property
    def store(self) -> DulwichGitStore:
        return self.host.store(PROJECT)


@pytest.fixture
def serve_app() -> Iterator[Callable[[Any], str]]:
    """Serve any WSGI app on an ephemeral loopback port; stopped at teardown."""
    servers: list[LoopbackWsgi] = []

    def start(app: Any) -> str:
        servers.append(LoopbackWsgi(app).start())
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def served(tmp_path: Path, serve_app: Callable[[Any], str]) -> Served:
    directory = Directory(
        tokens={
            "owner-token": GitPrincipal("owner-1", "owner"),
            "agent-a-token": GitPrincipal("agent-a", "agent"),
            "agent-b-token": GitPrincipal("agent-b", "agent"),
            "stranger-token": GitPrincipal("agent-z", "agent"),
        },
        members={"agent-a", "agent-b"},
        forks={"fa": "agent-a", "fb": "agent-b"},
    )
    host = DiskGitHost(tmp_path / "state")
    host.store(PROJECT).create_canonical()
    events = InProcessEventBus()
    app = GitHttpApp(host, directory.resolve, directory.lookup, events)
    return Served(serve_app(app), host, events, directory)
