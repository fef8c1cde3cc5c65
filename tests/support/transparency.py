"""The transparency log of a live server, for the client's tests: a server of a test's own
(tampering spoils a server's log for every later test), projects promoted through the gate
with a real quick check, the log's files, ledger and canonical's repository in the server's
home, and the `forkhorse` CLI run in this process with its own witness and profiles."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.signing.local_key import LocalKeyring
from forkhorse.cli import main
from forkhorse.tlog.verify import LogKey
from securesystemslib.signer import CryptoSigner

from tests.e2e.client.support import Ran
from tests.integration.api.support import checks_files
from tests.support.live import Lane, Project, Server, new_lane, start_server

# One real quick check (bubblewrap), no container: a review settles in about a second.
QUICK_ONLY = checks_files()
DATABASE = "forkhorse.sqlite3"


def fresh_server(directory: Path) -> tuple[Server, Callable[[], None]]:
    """A live server of a test's own, whose log the test may spoil (its projects' checks are
    quick only: no image is recorded)."""
    return start_server(directory / "home", ImageRegistry(directory / "images"))


@dataclass(frozen=True)
class Promoted:
    commit: str
    review: str
    promotion: str


def promote(project: Project, lane: Lane | None = None, n: int = 0) -> Promoted:
    """One change through the gate: review (a passing quick check), approval, promotion."""
    lane = lane or new_lane(project, f"agent-{n}")
    commit, review = lane.reviewed(QUICK_ONLY | {f"change-{n}.txt": f"{n}\n"})
    assert review["receipt"]["status"] == "passed", review
    status, body = project.approve(review["id"], commit)
    assert status == 200, body
    status, body = project.server.owner.promote(project.id, review["id"], commit)
    assert status == 200, body
    return Promoted(commit, review["id"], body["promotion"]["id"])


def log_key(server: Server) -> LogKey:
    body = server.client(None).ok("GET", "/log/key")
    return LogKey(body["origin"], body["publicKey"])


def save_key(server: Server, path: Path) -> Path:
    path.write_text(json.dumps(server.client(None).ok("GET", "/log/key")))
    return path


def home_signer(server: Server) -> CryptoSigner:
    """The key the server signs its checkpoints with (what a thief of the home holds)."""
    return LocalKeyring(server.home).signer()


def log_dir(server: Server) -> Path:
    return server.home / "log"


@contextlib.contextmanager
def ledger(server: Server) -> Iterator[sqlite3.Connection]:
    """The server's database, for writing behind its back."""
    conn = sqlite3.connect(server.home / DATABASE, isolation_level=None, timeout=30)
    try:
        yield conn
    finally:
        conn.close()


def served_checkpoint(server: Server) -> str:
    with ledger(server) as conn:
        (note,) = conn.execute("SELECT checkpoint FROM log_head WHERE one = 1").fetchone()
    return str(note)


def serve_checkpoint(server: Server, note: str) -> None:
    """Make the server serve `note` as its newest checkpoint (over HTTP and on disk)."""
    with ledger(server) as conn:
        conn.execute("UPDATE log_head SET checkpoint = ? WHERE one = 1", (note,))
    (log_dir(server) / "checkpoint").write_text(note)


def canonical_repo(server: Server, project: str) -> Path:
    return server.home / "git" / project / "canonical.git"


@dataclass
class Cli:
    """`forkhorse` in this process, configured only by its environment."""

    home: Path
    url: str | None = None
    token: str | None = None

    @property
    def witness_state(self) -> Path:
        return self.home / "witness.json"

    def env(self) -> dict[str, str]:
        env = {
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "FORKHORSE_WITNESS_STATE": str(self.witness_state),
            "FORKHORSE_PROFILE": "none",
        }
        if self.url:
            env["FORKHORSE_URL"] = self.url
        if self.token:
            env["FORKHORSE_TOKEN"] = self.token
        return env

    def run(self, *args: str) -> Ran:
        out, err = io.StringIO(), io.StringIO()
        cleared = {k: v for k, v in os.environ.items() if not k.startswith("FORKHORSE_")}
        with (
            mock.patch.dict(os.environ, cleared | self.env(), clear=True),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(list(args))
            except SystemExit as stop:
                code = int(stop.code or 0)
        return Ran(code, out.getvalue(), err.getvalue())
