"""Hostile agents against the receive (push) side of git smart HTTP (issue 13).

Real git CLI pushes and hand-built packs against real waitress servers on 127.0.0.1, on
the disk store and on the S3/DynamoDB store (moto). Memory is read from /proc as growth over
an idle baseline measured in the same test; temporary packs are looked for on disk.

- 1. fork isolation: a push may only reference what the pusher can read or pushes.
- 3. memory-bounded receive: inflated sizes, object count, tree entries, delta depth.
- 7. ref names checked before anything is written; a tag object is never a fork head; a
  failed push leaves no temporary pack, and stale ones are swept when a store opens.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import time
import zlib
from base64 import b64encode
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from dulwich.objects import Commit, Tree
from dulwich.pack import create_delta
from forkhorse.adapters.events import InProcessEventBus
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.git.ingest.session import sweep_stale_spools
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.domain.git_access import GitPrincipal
from forkhorse.domain.limits import GIT, MIB
from forkhorse.githttp.http import GitHttpApp

from tests.support.gitserve import PROJECT, Directory, Served, commit_all, git, new_repo
from tests.support.resources import peak_of, rss_bytes

CEILING = 256 * MIB  # the ceiling for the pack bomb, over the idle baseline
ZERO = "0" * 40
BLOB, TREE, COMMIT, TAG, OFS_DELTA, REF_DELTA = 3, 2, 1, 4, 6, 7
TYPE_NAMES = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob", TAG: b"tag"}


# --- hand-built packs -------------------------------------------------------------------
def object_header(kind: int, size: int) -> bytes:
    first = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(first | 0x80)
        first = size & 0x7F
        size >>= 7
    out.append(first)
    return bytes(out)


def whole(kind: int, data: bytes) -> bytes:
    return object_header(kind, len(data)) + zlib.compress(data)


def ofs_delta(distance: int, delta: bytes) -> bytes:
    encoded = bytearray([distance & 0x7F])
    distance >>= 7
    while distance:
        distance -= 1
        encoded.insert(0, 0x80 | (distance & 0x7F))
        distance >>= 7
    return object_header(OFS_DELTA, len(delta)) + bytes(encoded) + zlib.compress(delta)


def ref_delta(base_sha: str, delta: bytes) -> bytes:
    return object_header(REF_DELTA, len(delta)) + bytes.fromhex(base_sha) + zlib.compress(delta)


def build_pack(objects: Iterable[bytes], count: int | None = None) -> bytes:
    entries = list(objects)
    header = b"PACK" + (2).to_bytes(4) + (len(entries) if count is None else count).to_bytes(4)
    body = header + b"".join(entries)
    return body + hashlib.sha1(body).digest()


def object_id(kind: int, data: bytes) -> str:
    return hashlib.sha1(TYPE_NAMES[kind] + b" %d\0" % len(data) + data).hexdigest()


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def delta(base: bytes, result: bytes) -> bytes:
    return b"".join(create_delta(base, result))


def copy_delta(size: int) -> bytes:
    """A delta that rebuilds a `size`-byte base by copying it, 8 MiB per instruction."""
    out = bytearray(varint(size) + varint(size))
    step = 8 * MIB
    for offset in range(0, size, step):
        length = min(step, size - offset)
        out.append(0x80 | 0x0F | 0x70)  # four offset bytes, three size bytes
        out += offset.to_bytes(4, "little") + length.to_bytes(3, "little")
    return bytes(out)


def tree_bytes(entries: list[tuple[bytes, int, str]]) -> bytes:
    tree = Tree()
    for name, mode, sha in entries:
        tree.add(name, mode, sha.encode())
    return tree.as_raw_string()


def commit_bytes(tree: str, parents: list[str], message: bytes = b"hostile\n") -> bytes:
    commit = Commit()
    commit.tree = tree.encode()
    commit.parents = [parent.encode() for parent in parents]
    commit.author = commit.committer = b"Mallory <mallory@example.com>"
    commit.author_time = commit.commit_time = 1_790_000_000
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = message
    return commit.as_raw_string()


EMPTY_PACK = build_pack([])


# --- raw receive-pack ---------------------------------------------------------------------
def pkt(data: bytes) -> bytes:
    return f"{len(data) + 4:04x}".encode() + data


def receive_pack(
    server: Served,
    token: str,
    fork: str | None,
    commands: list[tuple[str, str, bytes]],
    pack: bytes | None = EMPTY_PACK,
) -> tuple[int, list[str]]:
    """One push as a hostile client sends it: commands, then a pack; returns the HTTP status
    and git's report-status lines (`unpack ...`, `ok <ref>`, `ng <ref> <reason>`)."""
    lines = b""
    for index, (old, new, ref) in enumerate(commands):
        line = f"{old} {new} ".encode() + ref
        if index == 0:
            line += b"\0report-status"
        lines += pkt(line + b"\n")
    body = lines + b"0000" + (pack or b"")
    url = urlsplit(server.remote(token, fork))
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=300)
    credentials = b64encode(f"any:{token}".encode()).decode()
    try:
        connection.request(
            "POST",
            f"{url.path}/git-receive-pack",
            body=body,
            headers={
                "Content-Type": "application/x-git-receive-pack-request",
                "Authorization": f"Basic {credentials}",
            },
        )
        response = connection.getresponse()
        return response.status, pkt_lines(response.read())
    finally:
        connection.close()


def pkt_lines(data: bytes) -> list[str]:
    lines = []
    while len(data) >= 4:
        size = int(data[:4], 16)
        if size == 0:
            data = data[4:]
            continue
        lines.append(data[4:size].decode("utf-8", "replace").rstrip("\n"))
        data = data[size:]
    return lines


def push(server: Served, source: Path, token: str, fork: str | None, *refspecs: str) -> str:
    output = git(
        "push", server.remote(token, fork), *(refspecs or ("main",)), cwd=source, check=False
    )
    print(f"git push {' '.join(refspecs)}: {output}")
    return output


# --- temporary packs ----------------------------------------------------------------------
def spools(root: Path) -> list[Path]:
    """Temporary packs anywhere under a store: `tmp_pack_*` and any `.pack` without `.idx`."""
    found = list(root.rglob("tmp_pack_*"))
    for pack in root.rglob("*.pack"):
        if not pack.with_suffix(".idx").exists():
            found.append(pack)
    return found


def assert_no_spools(server: Served) -> None:
    if isinstance(server.host, DiskGitHost):
        root = server.host._root / PROJECT
        assert spools(root) == [], spools(root)


# --- fixtures -----------------------------------------------------------------------------
def _directory() -> Directory:
    return Directory(
        tokens={
            "owner-token": GitPrincipal("owner-1", "owner"),
            "agent-a-token": GitPrincipal("agent-a", "agent"),
            "agent-b-token": GitPrincipal("agent-b", "agent"),
        },
        members={"agent-a", "agent-b"},
        forks={"fa": "agent-a", "fb": "agent-b"},
    )


@pytest.fixture
def served_s3(s3_host: S3GitHost, serve_app: Callable[[Any], str]) -> Served:
    directory = _directory()
    s3_host.store(PROJECT).create_canonical()
    events = InProcessEventBus()
    app = GitHttpApp(s3_host, directory.resolve, directory.lookup, events)
    return Served(serve_app(app), s3_host, events, directory)


@pytest.fixture(params=["disk", "s3"])
def any_store(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue("served" if request.param == "disk" else "served_s3")


class Lanes:
    """Canonical imported by the owner; agent A pushed unpublished work to fork fa; fork fb
    is agent B's, cloned at `b_work`."""

    def __init__(self, server: Served, tmp_path: Path) -> None:
        self.server = server
        owner = new_repo(tmp_path / "owner")
        (owner / "README.md").write_text("hello\n")
        (owner / "src").mkdir()
        (owner / "src" / "app.py").write_text("print('hello')\n" * 50)
        self.canonical = commit_all(owner, "import")
        assert "error" not in push(server, owner, "owner-token", None).lower()
        server.store.create_fork("fa")
        server.store.create_fork("fb")
        a_work = tmp_path / "agent-a"
        git("clone", "-q", server.remote("agent-a-token", "fa"), str(a_work), cwd=tmp_path)
        (a_work / "secret.txt").write_text("agent A's unpublished work\n")
        (a_work / "src" / "app.py").write_text("print('A was here')\n" * 50)
        self.secret = commit_all(a_work, "A's secret")
        push(server, a_work, "agent-a-token", "fa")
        assert server.store.head("fa") == self.secret
        self.secret_tree = git("rev-parse", f"{self.secret}^{{tree}}", cwd=a_work)
        self.secret_blob = git("rev-parse", f"{self.secret}:secret.txt", cwd=a_work)
        self.secret_app = git("rev-parse", f"{self.secret}:src/app.py", cwd=a_work)
        self.b_work = tmp_path / "agent-b"
        git("clone", "-q", server.remote("agent-b-token", "fb"), str(self.b_work), cwd=tmp_path)
        self.b_head = server.store.head("fb")
        self.b_tree = git("rev-parse", "HEAD^{tree}", cwd=self.b_work)

    def refs(self) -> dict[str | None, dict[str, str]]:
        return {fork: self.server.store.refs(fork) for fork in (None, "fa", "fb")}


@pytest.fixture
def lanes(any_store: Served, tmp_path: Path) -> Lanes:
    return Lanes(any_store, tmp_path)


@pytest.fixture
def disk_lanes(served: Served, tmp_path: Path) -> Lanes:
    return Lanes(served, tmp_path)


# --- 1. fork isolation ----------------------------------------------------------------------
UNREACHABLE = "neither in the pushed pack nor reachable"


def test_b_cannot_point_its_fork_at_a_head_nor_reference_a_objects(
    lanes: Lanes, tmp_path: Path
) -> None:
    """On disk and on S3: every way of naming A's objects without sending them is refused
    with the reason, B's fork is unchanged, and a clone of it cannot obtain them."""
    server, secret = lanes.server, lanes.secret
    before = lanes.refs()
    # (a) the reported attack: a ref at A's head, with an empty pack
    status, report = receive_pack(
        server,
        "agent-b-token",
        "fb",
        [(lanes.b_head, secret, b"refs/heads/main"), (ZERO, secret, b"refs/heads/steal")],
    )
    assert status == 200
    assert report[0] == "unpack ok"
    assert report[1].startswith("ng refs/heads/main ref target")
    assert report[2].startswith("ng refs/heads/steal ref target")
    assert UNREACHABLE in report[1]
    assert UNREACHABLE in report[2]
    # the same words for an object that does not exist at all: no existence oracle
    _, absent = receive_pack(server, "agent-b-token", "fb", [(ZERO, "e" * 40, b"refs/heads/x")])
    assert absent[1].replace("e" * 40, secret) == report[2].replace("steal", "x")

    # (b) a commit whose parent is A's head, (c) a tree naming A's blob and A's tree,
    # (d) a tag of A's commit, (e) a thin delta against A's blob
    tree = tree_bytes([(b"README.md", 0o100644, lanes.secret_blob)])
    subtree = tree_bytes([(b"stolen", 0o040000, lanes.secret_tree)])
    tag = f"object {secret}\ntype commit\ntag t\ntagger M <m@x> 1790000000 +0000\n\nt\n".encode()
    stolen_content = b"anything\n"
    thin = ref_delta(lanes.secret_blob, delta(b"agent A's unpublished work\n", stolen_content))
    attempts = {
        "parent": [whole(COMMIT, commit_bytes(lanes.b_tree, [secret]))],
        "blob in tree": [
            whole(TREE, tree),
            whole(COMMIT, commit_bytes(object_id(TREE, tree), [lanes.b_head])),
        ],
        "tree in tree": [
            whole(TREE, subtree),
            whole(COMMIT, commit_bytes(object_id(TREE, subtree), [lanes.b_head])),
        ],
        "tag": [whole(TAG, tag)],
        "thin delta base": [thin],
    }
    for name, objects in attempts.items():
        status, report = receive_pack(
            server,
            "agent-b-token",
            "fb",
            [(lanes.b_head, "1" * 40, b"refs/heads/main")],
            build_pack(objects),
        )
        assert status == 200, name
        assert report[0].startswith("unpack "), (name, report)
        assert UNREACHABLE in report[0], (name, report)
        assert_no_spools(server)
    assert stolen_content not in str(report).encode()

    # a git CLI push of B's own work still works, a thin pack against B's readable objects
    (lanes.b_work / "src" / "app.py").write_text("print('B was here')\n" * 50)
    mine = commit_all(lanes.b_work, "B's work")
    output = push(server, lanes.b_work, "agent-b-token", "fb")
    assert server.store.head("fb") == mine, output
    output = push(server, lanes.b_work, "agent-b-token", "fb", "main:refs/heads/copy")
    assert server.store.refs("fb")["refs/heads/copy"] == mine, output  # no new objects
    assert {k: v for k, v in lanes.refs().items() if k != "fb"} == {
        k: v for k, v in before.items() if k != "fb"
    }

    clone = tmp_path / "b-clone"
    git("clone", "-q", "--mirror", server.remote("agent-b-token", "fb"), str(clone), cwd=tmp_path)
    for sha in (secret, lanes.secret_tree, lanes.secret_blob, lanes.secret_app):
        assert "fatal" in git("cat-file", "-t", sha, cwd=clone, check=False).lower(), sha
    assert set(server.store.refs("fb")) == {"refs/heads/main", "refs/heads/copy"}
    assert_no_spools(server)


def test_the_promote_path_makes_a_head_readable_to_b(disk_lanes: Lanes) -> None:
    """Visibility follows canonical: once A's work is promoted, B may build on it."""
    from forkhorse.domain.git_access import mint_canonical_write_capability

    server, secret = disk_lanes.server, disk_lanes.secret
    capability = mint_canonical_write_capability(PROJECT)
    assert server.store.update_canonical_ref(
        capability, "refs/heads/main", disk_lanes.canonical, secret
    )
    status, report = receive_pack(
        server, "agent-b-token", "fb", [(disk_lanes.b_head, secret, b"refs/heads/main")]
    )
    assert (status, report) == (200, ["unpack ok", "ok refs/heads/main"])
    assert server.store.head("fb") == secret


# --- 3. memory-bounded receive ------------------------------------------------------------
def _zeros_stream(declared: int, actual: int) -> bytes:
    """A blob header declaring `declared` bytes and a zlib stream of `actual` zero bytes."""
    compressor = zlib.compressobj(9)
    chunk = bytes(MIB)
    parts = [object_header(BLOB, declared)]
    for start in range(0, actual, MIB):
        parts.append(compressor.compress(chunk[: min(MIB, actual - start)]))
    parts.append(compressor.flush())
    return b"".join(parts)


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """Packs of about 1 MiB that inflate to 1 GiB (built once: compressing 1 GiB of zeros)."""
    one_gib = 1024 * MIB
    per_object = GIT.object_bytes
    honest = _zeros_stream(per_object, per_object)
    copy_all = copy_delta(per_object)
    return {
        # 32 objects of 32 MiB: every header is within the per-object limit
        "32 x 32 MiB blobs": build_pack([honest] * (one_gib // per_object)),
        # one object whose header says 1 GiB
        "1 GiB blob": build_pack([_zeros_stream(one_gib, one_gib)]),
        # a header that lies: 1 KiB declared, 1 GiB of zeros in the stream
        "lying header": build_pack([_zeros_stream(1024, one_gib)]),
        # a 32 MiB blob and 31 deltas that each rebuild it: tiny deltas, 1 GiB resolved
        "delta fan-out": build_pack(_fan_out(honest, copy_all, one_gib // per_object - 1)),
    }


def _fan_out(base_entry: bytes, copy_all: bytes, count: int) -> list[bytes]:
    entries = [base_entry]
    offset = 12 + len(base_entry)
    for _ in range(count):
        entry = ofs_delta(offset - 12, copy_all)
        entries.append(entry)
        offset += len(entry)
    return entries


def test_a_pack_bomb_is_refused_with_memory_bounded(lanes: Lanes, bombs: dict[str, bytes]) -> None:
    server = lanes.server
    before = lanes.refs()
    results: dict[str, tuple[int, float, list[str]]] = {}
    for name, pack in bombs.items():
        assert len(pack) < 2 * MIB, (name, len(pack))
        started = time.monotonic()
        with peak_of(rss_bytes) as memory:
            status, report = receive_pack(
                server,
                "agent-b-token",
                "fb",
                [(lanes.b_head, "1" * 40, b"refs/heads/x")],
                pack,
            )
        results[name] = (memory.growth, time.monotonic() - started, report)
        assert status == 200, (name, status)
        assert report[0].startswith("unpack "), (name, report)
        assert report[0] != "unpack ok", (name, report)
        assert_no_spools(server)
    for name, (growth, seconds, report) in results.items():
        print(
            f"pack bomb {name!r} ({type(server.host).__name__}): "
            f"{len(bombs[name]) / MIB:.2f} MiB pack, "
            f"peak RSS growth {growth / MIB:.1f} MiB, {seconds:.2f} s: {report[0]}"
        )
    assert "inflates to more than 268435456 bytes" in results["32 x 32 MiB blobs"][2][0]
    assert "inflates to 1073741824 bytes" in results["1 GiB blob"][2][0]
    assert "inflates past the 1024 bytes its header declares" in results["lying header"][2][0]
    assert "inflates to more than 268435456 bytes" in results["delta fan-out"][2][0]
    assert all(growth < CEILING for growth, _, _ in results.values()), results
    assert lanes.refs() == before


def test_a_pack_claiming_four_billion_objects_is_refused(disk_lanes: Lanes) -> None:
    server = disk_lanes.server
    header = b"PACK" + (2).to_bytes(4) + (2**32 - 1).to_bytes(4)
    status, report = receive_pack(
        server, "agent-b-token", "fb", [(disk_lanes.b_head, "1" * 40, b"refs/heads/x")], header
    )
    assert status == 200
    assert report[0] == (
        "unpack the pack holds 4294967295 objects; the limit is 100000 objects per push "
        "(push fewer commits at a time)"
    )
    assert_no_spools(server)


def test_too_many_objects_are_refused(disk_lanes: Lanes) -> None:
    server = disk_lanes.server
    blobs = [whole(BLOB, b"%d\n" % number) for number in range(GIT.push_objects + 1)]
    status, report = receive_pack(
        server,
        "agent-b-token",
        "fb",
        [(disk_lanes.b_head, "1" * 40, b"refs/heads/x")],
        build_pack(blobs),
    )
    assert status == 200
    assert report[0].startswith("unpack the pack holds 100001 objects; the limit is 100000")
    assert_no_spools(server)


def test_a_too_large_object_is_refused_through_the_git_client(disk_lanes: Lanes) -> None:
    server, work = disk_lanes.server, disk_lanes.b_work
    (work / "big.bin").write_bytes(bytes(GIT.object_bytes + 1))  # compresses to 32 KiB
    commit_all(work, "big")
    output = push(server, work, "agent-b-token", "fb")
    assert f"inflates to {GIT.object_bytes + 1} bytes; the limit is {GIT.object_bytes}" in output
    assert "error: remote unpack failed:" in output
    reason = f"{GIT.object_bytes + 1} bytes; the limit is {GIT.object_bytes}"
    assert any(  # the reason also comes as `remote: <why>` (issue 29)
        line.startswith("remote: ") and reason in line for line in output.splitlines()
    ), output
    assert "[remote rejected] main -> main (unpacker error)" in output
    assert server.store.head("fb") == disk_lanes.b_head
    assert_no_spools(server)


def test_a_tree_with_too_many_entries_is_refused_through_the_git_client(
    disk_lanes: Lanes,
) -> None:
    server, work = disk_lanes.server, disk_lanes.b_work
    wide = work / "wide"
    wide.mkdir()
    for number in range(GIT.tree_entries + 1):
        (wide / f"f{number}").write_bytes(b"")
    commit_all(work, "wide")
    output = push(server, work, "agent-b-token", "fb")
    assert f"has more than {GIT.tree_entries} entries" in output, output
    assert server.store.head("fb") == disk_lanes.b_head
    assert_no_spools(server)


def _assert_too_deep(lanes: Lanes, entries: list[bytes], depth: int) -> None:
    status, report = receive_pack(
        lanes.server,
        "agent-b-token",
        "fb",
        [(lanes.b_head, "1" * 40, b"refs/heads/x")],
        build_pack(entries),
    )
    assert status == 200
    assert f"is a delta {depth} deep; the limit is {GIT.delta_depth}" in report[0]


def test_deep_delta_chains_are_refused(disk_lanes: Lanes) -> None:
    server = disk_lanes.server
    depth = GIT.delta_depth + 1
    versions = [b"line\n" * 100 + b"%d\n" % number for number in range(depth + 1)]
    # OFS_DELTA chain: refused while the pack streams in
    entries = [whole(BLOB, versions[0])]
    offsets = [12]
    for number in range(1, depth + 1):
        offsets.append(offsets[-1] + len(entries[-1]))
        entries.append(
            ofs_delta(offsets[-1] - offsets[-2], delta(versions[number - 1], versions[number]))
        )
    _assert_too_deep(disk_lanes, entries, depth)
    # REF_DELTA chain inside the pack (bases named by SHA): refused while it is resolved
    entries = [whole(BLOB, versions[0])]
    for number in range(1, depth + 1):
        base = object_id(BLOB, versions[number - 1])
        entries.append(ref_delta(base, delta(versions[number - 1], versions[number])))
    _assert_too_deep(disk_lanes, entries, depth)
    # at the limit, the same chain is accepted
    entries = entries[: GIT.delta_depth + 1]
    tree = tree_bytes([(b"v", 0o100644, object_id(BLOB, versions[GIT.delta_depth]))])
    commit = commit_bytes(object_id(TREE, tree), [disk_lanes.b_head])
    _, ok = receive_pack(
        server,
        "agent-b-token",
        "fb",
        [(disk_lanes.b_head, object_id(COMMIT, commit), b"refs/heads/main")],
        build_pack([*entries, whole(TREE, tree), whole(COMMIT, commit)]),
    )
    assert ok == ["unpack ok", "ok refs/heads/main"], ok
    assert_no_spools(server)


# --- 7. ref names, ref count, tag heads, temporary packs ----------------------------------
def test_bad_ref_names_are_refused_before_anything_is_written(disk_lanes: Lanes) -> None:
    server, b_head = disk_lanes.server, disk_lanes.b_head
    fork_dir = server.host._root / PROJECT / "forks" / "fb.git"
    files_before = sorted(p.relative_to(fork_dir) for p in fork_dir.rglob("*"))
    before = disk_lanes.refs()
    events = len(server.events.published)
    refused = {
        b"refs/heads/\xff": "must be UTF-8",
        b"refs/heads/a\x00b": "not a valid git ref name",
        b"refs/heads/tab\there": "not a valid git ref name",
        b"refs/heads/\xe2\x80\xaeevil": "control, invisible or space",  # right-to-left override
        b"refs/heads/" + b"x" * 300: "longer than 255 bytes",
        b"HEAD": "only refs/heads/* and refs/tags/*",
        b"refs/remotes/origin/main": "only refs/heads/* and refs/tags/*",
        b"refs/heads/a..b": "not a valid git ref name",
    }
    for name, reason in refused.items():
        status, report = receive_pack(
            server,
            "agent-b-token",
            "fb",
            [(ZERO, b_head, b"refs/heads/fine"), (ZERO, b_head, name)],
        )
        assert status == 200, name
        assert report[0] == "unpack pre-receive hook declined", (name, report)
        assert all(line.endswith("pre-receive hook declined") for line in report), report
        # dulwich sends the reason on git's side-band error channel, which git prints
        sideband = _sideband_refusal(server, b_head, name)
        assert reason in sideband, (name, sideband)
    # a space splits git's command line: a protocol error, answered 400 with git's ERR line
    status, report = receive_pack(
        server, "agent-b-token", "fb", [(ZERO, b_head, b"refs/heads/with space")]
    )
    assert status == 400, (status, report)
    assert sorted(p.relative_to(fork_dir) for p in fork_dir.rglob("*")) == files_before
    assert disk_lanes.refs() == before
    # the git client itself sends a \xff name; it prints the reason
    output = push(
        server, disk_lanes.b_work, "agent-b-token", "fb", os.fsdecode(b"HEAD:refs/heads/\xff")
    )
    assert "a ref name must be UTF-8" in output, output
    assert sorted(p.relative_to(fork_dir) for p in fork_dir.rglob("*")) == files_before
    assert disk_lanes.refs() == before
    assert len(server.events.published) == events


def _sideband_refusal(server: Served, b_head: str, name: bytes) -> str:
    """The same push, with side-band: the bad name second (a NUL in the first command line
    would start git's capability list)."""
    return _sideband_commands(server, [(ZERO, b_head, b"refs/heads/fine"), (ZERO, b_head, name)])


def test_too_many_ref_updates_are_refused(disk_lanes: Lanes) -> None:
    server, b_head = disk_lanes.server, disk_lanes.b_head
    commands = [(ZERO, b_head, b"refs/tags/t%d" % n) for n in range(GIT.ref_updates + 1)]
    sideband = _sideband_commands(server, commands)
    assert f"this push updates {GIT.ref_updates + 1} refs; the limit is" in sideband
    assert set(server.store.refs("fb")) == {"refs/heads/main"}
    # through the git client
    work = disk_lanes.b_work
    for number in range(GIT.ref_updates + 1):
        git("tag", f"v{number}", cwd=work)
    output = push(server, work, "agent-b-token", "fb", "--tags")
    assert f"this push updates {GIT.ref_updates + 1} refs" in output, output
    assert set(server.store.refs("fb")) == {"refs/heads/main"}


def _sideband_commands(server: Served, commands: list[tuple[str, str, bytes]]) -> str:
    url = urlsplit(server.remote("agent-b-token", "fb"))
    lines = b""
    for index, (old, new, ref) in enumerate(commands):
        caps = b"\0report-status side-band-64k" if index == 0 else b""
        lines += pkt(f"{old} {new} ".encode() + ref + caps + b"\n")
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
    try:
        connection.request(
            "POST",
            f"{url.path}/git-receive-pack",
            body=lines + b"0000" + EMPTY_PACK,
            headers={
                "Content-Type": "application/x-git-receive-pack-request",
                "Authorization": "Basic " + b64encode(b"any:agent-b-token").decode(),
            },
        )
        return connection.getresponse().read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_a_tag_object_is_never_a_fork_head(disk_lanes: Lanes) -> None:
    server, work = disk_lanes.server, disk_lanes.b_work
    git("tag", "-a", "v1", "-m", "a tag", cwd=work)
    tag = git("rev-parse", "v1", cwd=work)
    output = push(server, work, "agent-b-token", "fb", "v1:refs/heads/main", "v1:refs/heads/t")
    assert f"a branch must point at a commit, and {tag} is a tag" in output, output
    assert server.store.head("fb") == disk_lanes.b_head
    assert set(server.store.refs("fb")) == {"refs/heads/main"}
    # a tag ref may name the tag object
    output = push(server, work, "agent-b-token", "fb", "v1")
    assert server.store.refs("fb")["refs/tags/v1"] == tag, output


def test_failed_pushes_leave_no_temporary_pack_and_stale_ones_are_swept(
    disk_lanes: Lanes, tmp_path: Path
) -> None:
    server = disk_lanes.server
    objects = server.host._root / PROJECT / "objects"
    failures = [
        build_pack([whole(BLOB, b"x")], count=2),  # truncated
        build_pack([whole(BLOB, b"x")])[:-1] + b"\0",  # bad checksum
        build_pack([object_header(BLOB, 5) + b"not zlib"]),
        build_pack([whole(COMMIT, b"garbage")]),
        build_pack([whole(COMMIT, commit_bytes(disk_lanes.b_tree, [disk_lanes.secret]))]),
    ]
    for pack in failures:
        status, report = receive_pack(
            server, "agent-b-token", "fb", [(disk_lanes.b_head, "1" * 40, b"refs/heads/x")], pack
        )
        assert status == 200, report
        assert report[0] != "unpack ok", report
        assert spools(objects) == [], report
    # stale temporaries from a crash are removed when a store is opened; fresh ones stay
    old = time.time() - 2 * 3600
    crashed = [objects / "tmp_pack_crashed", objects / "pack" / "tmpcrashed.pack"]
    running = [objects / "tmp_pack_running", objects / "pack" / "tmprunning.pack"]
    for path in [*crashed, *running]:
        path.write_bytes(b"PACK")
    for path in crashed:
        os.utime(path, (old, old))
    assert sweep_stale_spools(objects) == 2
    assert [path.exists() for path in crashed + running] == [False, False, True, True]
    for path in running:
        os.utime(path, (old, old))
    fresh_host = DiskGitHost(server.host._root.parent)
    fresh_host.store(PROJECT)  # this process already swept this store once
    DiskGitHost(tmp_path / "other").store(PROJECT)
    assert sweep_stale_spools(objects) == 2
    assert spools(objects) == []


def test_objects_anywhere_in_readable_history_may_be_named(disk_lanes: Lanes) -> None:
    """The rule is reachability, not the tip's tree: a blob that only canonical's history
    holds (deleted since) may be named without being sent."""
    from forkhorse.domain.git_access import mint_canonical_write_capability

    from tests.support.gitrepo import commit_files

    server, store = disk_lanes.server, disk_lanes.server.store
    old = commit_files(store, {"gone.txt": "deleted later\n"}, parent=disk_lanes.canonical)
    newer = commit_files(store, {"README.md": "hello again\n"}, parent=old)
    capability = mint_canonical_write_capability(PROJECT)
    assert store.update_canonical_ref(capability, "refs/heads/main", disk_lanes.canonical, newer)
    gone = store.read_tree(store.read_commit(old).tree)[0].sha
    tree = tree_bytes([(b"back.txt", 0o100644, gone)])
    commit = commit_bytes(object_id(TREE, tree), [disk_lanes.b_head])
    _, report = receive_pack(
        server,
        "agent-b-token",
        "fb",
        [(disk_lanes.b_head, object_id(COMMIT, commit), b"refs/heads/main")],
        build_pack([whole(TREE, tree), whole(COMMIT, commit)]),
    )
    assert report == ["unpack ok", "ok refs/heads/main"], report


def test_the_connectivity_walk_reads_at_most_its_budget(disk_lanes: Lanes) -> None:
    """A name that is nowhere costs one bounded walk, however long the readable history."""
    from forkhorse.adapters.git.ingest.reachability import Readable

    from tests.support.gitrepo import commit_files

    store = disk_lanes.server.store
    head = store.head()
    for number in range(300):
        head = commit_files(store, {"n.txt": f"{number}\n", "d/x": f"{number}\n"}, parent=head)
    objects = store.objects
    reads = []
    original = objects.get_raw

    def counted(sha: Any) -> Any:
        reads.append(sha)
        return original(sha)

    objects.get_raw = counted
    unlimited = Readable(objects, [head.encode()], budget=10_000)
    assert unlimited.find({b"e" * 40}) == set()
    full_walk = len(reads)
    reads.clear()
    bounded = Readable(objects, [head.encode()], budget=100)
    started = time.monotonic()
    assert bounded.find({b"e" * 40}) == set()
    assert len(reads) <= 100
    assert full_walk > 900  # 300 commits, each with a root tree and a subtree
    print(f"bounded walk: {len(reads)} reads of {full_walk}, {time.monotonic() - started:.3f} s")
