"""Tampering with a live server's transparency log, canonical or the key behind its back, as
someone with write access to its home would: each change is caught by `forkhorse verify-log`
(exit 4 for a log that is not what it signed, 1 for a commit it does not explain) or refused
by the clients' witness (exit 4), and the message names what changed.

Each test has a server of its own (`fresh`, quick checks only): a project promoted once
through the gate, an owner whose CLI pinned the log on its first call, and an auditor who
verified it once."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.signing.local_key import LocalKeyring
from forkhorse.client.api import ForkhorseClient
from forkhorse.client.config import ClientConfig
from forkhorse.client.errors import WitnessRefused
from forkhorse.client.witness import Witnessed
from forkhorse.domain import merkle
from forkhorse.domain.checkpoint import Checkpoint
from forkhorse.domain.log_entries import ImportSubject, facts_digest, make_entry
from forkhorse.tlog.note import sign_note
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.client.support import PACKAGE_ROOT, run_async
from tests.support.live import Project, Server, new_project
from tests.support.signed_note import bundle_entries, bundle_of
from tests.support.transparency import (
    Cli,
    Promoted,
    canonical_repo,
    fresh_server,
    home_signer,
    ledger,
    log_dir,
    log_key,
    promote,
    save_key,
    serve_checkpoint,
    served_checkpoint,
)

# The projects' checks run in bubblewrap.
pytestmark = pytest.mark.sandbox
EXIT_FINDINGS, EXIT_REFUSED = 1, 4


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Server]:
    live, stop = fresh_server(tmp_path)
    yield live
    stop()


BUNDLE = "tile/entries/000.p/{size}"


@dataclass
class Scene:
    server: Server
    project: Project
    promoted: Promoted
    owner: Cli
    auditor: Cli
    key: Path
    state: Path

    def audit(self, *extra: str, log: str | None = None) -> Any:
        """The auditor's verify-log over HTTP, with its memory of the last checkpoint."""
        return self.auditor.run(
            "verify-log", "--log", log or f"{self.server.url}/log", "--key", str(self.key),
            "--state", str(self.state), *extra,
        )  # fmt: skip

    def size(self) -> int:
        with ledger(self.server) as conn:
            (size,) = conn.execute("SELECT size FROM log_head WHERE one = 1").fetchone()
        return int(size)

    def append(self) -> None:
        """One more entry (a settings change), published at once."""
        path = f"/projects/{self.project.id}/settings"
        self.server.owner.ok("PATCH", path, {"requireReceipt": False})


@pytest.fixture
def scene(fresh: Server, tmp_path: Path) -> Scene:
    project = new_project(fresh, True)
    promoted = promote(project)
    owner = Cli(tmp_path / "owner", fresh.url, fresh.owner_token)
    assert owner.run("projects").code == 0
    found = Scene(
        fresh, project, promoted, owner, Cli(tmp_path / "auditor"),
        save_key(fresh, tmp_path / "log-key.json"), tmp_path / "auditor-state.json",
    )  # fmt: skip
    first = found.audit()
    assert first.code == 0, first.stdout + first.stderr
    return found


def _refused(ran: Any, *named: str) -> str:
    assert ran.code == EXIT_REFUSED, ran.stdout + ran.stderr
    said = ran.stdout + ran.stderr
    for part in named:
        assert part in said, said
    return str(said)


# --- the entries ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("delete", "holds 5 entries, not 6"),
        ("reorder", "entry 2 was deleted, reordered or edited"),
        ("edit", "entry 4 was deleted, reordered or edited"),
    ],
)
def test_an_entry_deleted_reordered_or_edited_in_its_bundle_is_caught(
    scene: Scene, change: str, named: str
) -> None:
    path = log_dir(scene.server) / BUNDLE.format(size=scene.size())
    entries = bundle_entries(path.read_bytes())
    if change == "delete":
        del entries[3]
    elif change == "reorder":
        entries[2], entries[3] = entries[3], entries[2]
    else:
        entries[4] = entries[4].replace(b'"passed"', b'"failed"')
    path.write_bytes(bundle_of(entries))
    _refused(scene.audit(), "REFUSED", named)
    _refused(scene.audit(log=str(log_dir(scene.server))), named)  # the files copied as they are


def test_a_rewritten_ledger_row_republished_is_a_split_view_then_rewritten_history(
    scene: Scene,
) -> None:
    # The approval (entry 3) now approves another commit; the log is rebuilt and re-signed
    # from the ledger with the server's own key, so it is consistent in itself.
    with ledger(scene.server) as conn:
        (entry,) = conn.execute("SELECT entry FROM log_entries WHERE idx = 3").fetchone()
        forged = bytes(entry).replace(scene.promoted.commit.encode(), b"f" * 40)
        conn.execute("UPDATE log_entries SET entry = ? WHERE idx = 3", (forged,))
        conn.execute("UPDATE log_head SET published = 0, previous = 0, checkpoint = NULL")
    for tile in (log_dir(scene.server) / "tile").rglob("*"):
        if tile.is_file():
            tile.unlink()
    scene.server.restart()  # publishes what the ledger holds
    said = _refused(scene.owner.run("projects"), "split view: two different trees of size 6")
    assert "/projects" not in said
    _refused(scene.audit(), "split view: two different trees of size 6")

    scene.append()
    _refused(
        scene.owner.run("projects"),
        "rewritten history: the tree of size 7 does not append to the tree of size 6",
    )
    _refused(scene.audit(), "rewritten history")


def test_an_edited_hash_tile_is_caught(scene: Scene) -> None:
    path = log_dir(scene.server) / f"tile/0/000.p/{scene.size()}"
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF
    path.write_bytes(bytes(data))
    _refused(scene.audit(), "the tiles do not hash to the checkpoint's root at size 6")


# --- canonical --------------------------------------------------------------------------------
def test_a_direct_push_to_canonical_is_reported_by_commit_id(scene: Scene) -> None:
    tree = scene.server.worktree()
    tree.git(scene.server.owner_token, "pull", "-q", scene.project.canonical_url, "main")
    bypass = tree.commit({"bypass.txt": "not through the gate\n"}, "bypass")
    tree.git(None, "push", "-q", str(canonical_repo(scene.server, scene.project.id)), "HEAD:main")

    ran = scene.owner.run(
        "verify-log", "--project", scene.project.id, "--clone", scene.project.canonical_url,
        "--json",
    )  # fmt: skip
    assert ran.code == EXIT_FINDINGS, ran.stdout + ran.stderr
    [audited] = ran.json()["projects"]
    assert audited["tip"] == bypass
    [finding] = audited["findings"]
    assert finding["commits"] == [bypass]
    assert f"canonical's head {bypass} is not where the log's last promotion" in finding["message"]
    human = scene.owner.run(
        "verify-log", "--project", scene.project.id, "--clone", scene.project.canonical_url
    )
    assert human.code == EXIT_FINDINGS
    assert f"  unexplained commit {bypass}" in human.stdout.splitlines()
    assert human.stdout.splitlines()[-1] == "1 finding(s)"


# --- checkpoints ------------------------------------------------------------------------------
def test_an_older_checkpoint_served_is_refused_by_the_witness_verify_log_and_mcp(
    scene: Scene, tmp_path: Path
) -> None:
    older = served_checkpoint(scene.server)
    scene.append()
    assert scene.owner.run("projects").code == 0  # the witness follows to size 7
    assert scene.audit().code == 0
    serve_checkpoint(scene.server, older)
    rollback = "rollback: the log's checkpoint is of size 6, older than the size 7"
    _refused(scene.owner.run("projects", "--json"), rollback)
    _refused(scene.audit(), rollback)
    _refused(scene.audit(log=str(log_dir(scene.server))), rollback)
    assert rollback in _mcp_refusal(scene, tmp_path)


def _mcp_refusal(scene: Scene, tmp_path: Path) -> str:
    """What the MCP server's list_projects answers, with the owner's witness."""
    env = scene.owner.env() | {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": PACKAGE_ROOT,
    }
    answer: dict[str, Any] = {}

    async def session() -> None:
        parameters = StdioServerParameters(
            command=sys.executable, args=["-m", "forkhorse.cli", "mcp"], env=env
        )
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                result = await client.call_tool("list_projects", {})
                answer["error"] = result.is_error
                answer["text"] = " ".join(getattr(c, "text", "") for c in result.content)

    run_async(session)
    assert answer["error"], answer
    return str(answer["text"])


def test_a_split_view_signed_with_the_servers_key_is_refused(scene: Scene) -> None:
    key = log_key(scene.server)
    other = merkle.root([merkle.leaf_hash(b"another history %d" % i) for i in range(6)])
    forged = sign_note(
        Checkpoint(key.origin, 6, other).body(), key.origin, home_signer(scene.server)
    )
    serve_checkpoint(scene.server, forged)
    said = _refused(scene.owner.run("projects"), "split view: two different trees of size 6")
    assert other.hex()[:16] in said
    _refused(scene.audit(), "split view", other.hex()[:16])


def test_concurrent_appends_never_fork_the_tree_and_a_forked_one_is_refused(
    scene: Scene,
) -> None:
    gate_log = scene.server.app.runtime.deps.gate_log
    witness = scene.owner
    refusals: list[str] = []
    seen: list[Witnessed | None] = []
    done = threading.Event()

    def appender(worker: int) -> None:
        for n in range(5):
            subject = ImportSubject(commit=f"{worker:020x}{n:020x}")
            entry = make_entry(
                f"race-{worker}", subject, facts_digest(subject), f"race/{worker}/{n}"
            )
            gate_log.append(entry)

    def watcher() -> None:  # a client witnessing the log while it grows
        config = ClientConfig(scene.server.url, scene.server.owner_token)
        with ForkhorseClient(config, witness_state=witness.witness_state) as client:
            while not done.is_set():
                try:
                    seen.append(client.witness_log())
                except WitnessRefused as refused:
                    refusals.append(str(refused))

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(6)]
    watching = threading.Thread(target=watcher)
    watching.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    watching.join()
    assert refusals == []
    sizes = [w.checkpoint.size for w in seen if w is not None and w.checkpoint is not None]
    assert sizes == sorted(sizes)
    assert scene.size() == 6 + 30
    with ledger(scene.server) as conn:
        rows = conn.execute("SELECT idx, key FROM log_entries ORDER BY idx").fetchall()
    assert [idx for idx, _ in rows] == list(range(36))
    assert scene.audit().code == 0
    assert witness.run("projects").code == 0

    # Two appenders that each published their own entry 36 fork the tree: whichever one a
    # client saw, the other is refused.
    key = log_key(scene.server)
    leaves = [merkle.leaf_hash(bytes(e)) for (e,) in _ledger_entries(scene)]
    fork = merkle.root([*leaves, merkle.leaf_hash(b"the other appender's entry")])
    scene.append()
    assert witness.run("projects").code == 0
    serve_checkpoint(
        scene.server,
        sign_note(Checkpoint(key.origin, 37, fork).body(), key.origin, home_signer(scene.server)),
    )
    _refused(witness.run("projects"), "split view: two different trees of size 37")


def _ledger_entries(scene: Scene) -> list[tuple[bytes]]:
    with ledger(scene.server) as conn:
        return [tuple(row) for row in conn.execute("SELECT entry FROM log_entries ORDER BY idx")]


# --- the key ----------------------------------------------------------------------------------
def test_a_rotated_key_is_refused_until_the_owner_re_pins(scene: Scene) -> None:
    before = log_key(scene.server)
    LocalKeyring(scene.server.home).rotate()
    scene.server.restart()
    scene.append()  # the next checkpoint is signed with the new key
    after = log_key(scene.server)
    assert after.public_pem != before.public_pem
    said = _refused(scene.owner.run("projects"), "its key changed", "witness forget --server")
    assert before.origin in said
    _refused(scene.audit(), "no signature of")  # the auditor's saved key is the old one

    assert scene.owner.run("witness", "forget").code == 0
    assert scene.owner.run("projects").code == 0
    shown = scene.owner.run("witness", "show", "--json").json()["servers"][scene.server.url]
    assert shown["publicKey"] == after.public_pem


def test_the_witness_refusal_is_a_client_error_in_the_library(scene: Scene) -> None:
    serve_checkpoint(scene.server, served_checkpoint(scene.server).replace("\n6\n", "\n5\n"))
    config = ClientConfig(scene.server.url, scene.server.owner_token)
    with (
        ForkhorseClient(config, witness_state=scene.owner.witness_state) as client,
        pytest.raises(WitnessRefused, match="does not verify"),
    ):
        client.list_projects()
