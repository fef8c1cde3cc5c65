"""`forkhorse verify-log` and the client's witness against a live server, as an owner and an
auditor use them: the owner's client pins the log on its first call and verify-log audits
canonical from a fresh clone with the pinned key; the auditor verifies a copy of the static
files, then the served ones, with the saved key and its own memory of the last checkpoint.
Interop: the served checkpoint verifies with a signed-note verifier written from the spec,
and its root is the RFC 9162 hash of the entry bundles read by the spec's layout."""

from __future__ import annotations

import hashlib
import shutil
import stat
import urllib.request
from pathlib import Path

from tests.support.live import Project, Server
from tests.support.signed_note import bundle_entries, verify_checkpoint
from tests.support.transparency import Cli, log_dir, log_key, promote, save_key


def _clone(server: Server, project: Project) -> Path:
    tree = server.worktree()
    tree.git(server.owner_token, "pull", "-q", project.canonical_url, "main")
    return tree.path


def test_an_owner_and_an_auditor_check_a_project_end_to_end(
    server: Server, required: Project, tmp_path: Path
) -> None:
    first = promote(required)
    # The owner, as the README's tour: a profile, whose first call pins the log.
    owner = Cli(tmp_path / "owner")
    token = tmp_path / "owner-token"
    token.write_text(server.owner_token)
    login = ("--url", server.url, "--project", required.id, "--token-file", str(token))
    assert owner.run("login", *login, "--profile", "owner").code == 0
    assert owner.run("projects", "--profile", "owner").code == 0

    ran = owner.run(
        "verify-log", "--profile", "owner", "--clone", required.canonical_url,
        "--promotion", first.promotion, "--json",
    )  # fmt: skip
    assert ran.code == 0, ran.stdout + ran.stderr
    report = ran.json()
    assert report["ok"] is True
    assert report["previous"]["from"] == "the witness's pin"
    [audited] = report["projects"]
    assert (audited["tip"], audited["imported"]) == (first.commit, required.initial)
    assert (audited["promotions"], audited["findings"]) == (1, [])
    assert [e["kind"] for e in report["included"]] == ["promotion"]
    assert report["included"][0]["subject"]["commit"] == first.commit

    # The auditor: the key saved once, a copy of the static files and a clone of canonical.
    auditor = Cli(tmp_path / "auditor")
    key = save_key(server, tmp_path / "log-key.json")
    files = shutil.copytree(log_dir(server), tmp_path / "log-copy")
    clone = _clone(server, required)
    state = tmp_path / "auditor-state.json"
    ran = auditor.run(
        "verify-log", "--log", str(files), "--key", str(key), "--state", str(state),
        "--project", required.id, "--repo", str(clone),
    )  # fmt: skip
    assert ran.code == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[-1] == "all holds"
    assert f"project {required.id}: canonical refs/heads/main at {first.commit}" in ran.stdout
    assert stat.S_IMODE(state.stat().st_mode) == 0o600

    second = promote(required, n=1)
    ran = auditor.run(
        "verify-log", "--log", f"{server.url}/log", "--key", str(key), "--state", str(state),
        "--commit", second.commit,
    )  # fmt: skip
    assert ran.code == 0, ran.stdout + ran.stderr
    seen_before = report["log"]["size"]
    assert f"append-only: consistent with size {seen_before}," in ran.stdout
    included = [line for line in ran.stdout.splitlines() if line.startswith("included:")]
    assert [line.split("(")[1].split(" ")[0] for line in included] == [
        "receipt", "approval", "receipt", "promotion"]  # fmt: skip


def test_the_witness_is_shown_forgotten_and_pinned_again(server: Server, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "client", server.url, server.owner_token)
    assert cli.run("witness", "show").stdout.startswith("no server pinned")
    assert cli.run("projects").code == 0
    shown = cli.run("witness", "show", "--json").json()
    pin = shown["servers"][server.url]
    assert pin["origin"] == log_key(server).origin
    assert pin["size"] >= 1
    forgot = cli.run("witness", "forget")
    assert forgot.code == 0
    assert f"forgot {server.url}" in forgot.stdout
    assert cli.run("witness", "show", "--json").json()["servers"] == {}
    key = save_key(server, tmp_path / "key.json")
    assert cli.run("witness", "pin", "--key", str(key)).code == 0
    assert cli.run("projects").code == 0
    assert cli.run("witness", "show", "--json").json()["servers"][server.url]["how"] == "given"


def test_a_served_checkpoint_verifies_with_a_verifier_written_from_the_spec(
    server: Server, required: Project
) -> None:
    promote(required, n=2)
    key = log_key(server)
    with urllib.request.urlopen(f"{server.url}/log/checkpoint", timeout=30) as answer:
        note = answer.read().decode()
    checkpoint = verify_checkpoint(note, key.origin, key.public_pem)
    assert checkpoint.size >= 6
    assert checkpoint.root == _rfc9162_root(_entries(server.url, checkpoint.size))


def _entries(url: str, size: int) -> list[bytes]:
    """The entries, read by tlog-tiles' layout: bundles of 256, each entry a big-endian
    uint16 length and its bytes; the last bundle partial (`.p/<width>`)."""
    entries: list[bytes] = []
    for index in range(-(-size // 256)):
        width = min(256, size - index * 256)
        suffix = "" if width == 256 else f".p/{width}"
        with urllib.request.urlopen(f"{url}/log/tile/entries/{index:03d}{suffix}") as answer:
            entries += bundle_entries(answer.read())
    return entries


def _rfc9162_root(entries: list[bytes]) -> bytes:
    """MTH from RFC 9162 section 2.1.1, recursively, with hashlib alone."""
    if not entries:
        return hashlib.sha256(b"").digest()
    if len(entries) == 1:
        return hashlib.sha256(b"\x00" + entries[0]).digest()
    split = 1 << ((len(entries) - 1).bit_length() - 1)
    left, right = _rfc9162_root(entries[:split]), _rfc9162_root(entries[split:])
    return hashlib.sha256(b"\x01" + left + right).digest()
