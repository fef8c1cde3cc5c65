"""Hostile input at the API's edge (issue 13, attacks 7 and 8, and the hardening list),
against a real `forkhorse serve` process so the server's own memory is what is measured.

Each malformed body gets its exact 4xx and changes nothing; a storm of Flow-Next receipts
is bounded per review while another project still answers; the Origin check holds against
DNS rebinding; the home and database are private.
"""

from __future__ import annotations

import json
import sqlite3
import stat
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.domain.limits import API_INPUT, MIB, REVIEW_RECEIPTS

from tests.integration.api.support import Client, Worktree
from tests.support.aws import load_function
from tests.support.lambda_api import sample_event
from tests.support.lambda_context import FakeLambdaContext
from tests.support.resources import peak_of, rss_bytes
from tests.support.serve import ServeProcess, free_port

RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}
DEPTH_REFUSED = f"The body nests JSON deeper than the limit of {API_INPUT.json_depth} levels."
NUMBER_REFUSED = (
    f"The body has a number longer than the limit of {API_INPUT.json_number_chars} characters."
)
NOT_FINITE = "The body has a non-finite number (NaN or Infinity); JSON numbers must be finite."
TOO_LARGE = f"The request body is larger than the limit of {API_INPUT.body_bytes} bytes."


@dataclass
class Live:
    url: str
    pid: int
    home: Path
    owner: Client
    project: str
    other_project: str
    agent: Client
    reviews: list[str]

    def raw(self, body: bytes, path: str = "/projects", **headers: str) -> requests.Response:
        sent = {"Authorization": f"Bearer {self.owner.token}", "Content-Type": "application/json"}
        return requests.post(self.url + path, data=body, headers={**sent, **headers}, timeout=60)

    def snapshot(self) -> Any:
        """Everything the owner can see: any change of state shows here."""
        projects = self.owner.ok("GET", "/projects")
        states = [self.owner.state(p) for p in (self.project, self.other_project)]
        return projects, states

    def receipts_path(self, review: str) -> str:
        return f"/projects/{self.project}/reviews/{review}/review-receipts"


def _stale_home(home: Path) -> None:
    """A home as an older version left it: world-readable directory and database."""
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "forkhorse.sqlite3").touch(mode=0o644)
    (home / "forkhorse.sqlite3").chmod(0o644)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("hostile-api")
    home = root / "home"
    _stale_home(home)
    server = ServeProcess(home, free_port())
    server.start()
    try:
        assert server.pid is not None
        yield _world(server.url, server.pid, home, root)
    finally:
        server.stop()


def _world(url: str, pid: int, home: Path, root: Path) -> Live:
    owner = Client(url, (home / "owner-token").read_text().strip())
    project = owner.ok("POST", "/projects", {"name": "p"}, expect=201)["project"]
    other = owner.ok("POST", "/projects", {"name": "q"}, expect=201)["project"]
    base = Worktree(root / "base")
    commit = base.commit({"README.md": "hi\n"}, "initial")
    assert owner.token is not None
    base.push(project["cloneUrl"], owner.token)
    created = owner.ok("POST", "/agents", {"name": "a"}, expect=201)
    agent = Client(url, created["token"])
    owner.ok("POST", f"/projects/{project['id']}/members", {"agentId": created["agent"]["id"]}, 201)
    fork = agent.ok("POST", f"/projects/{project['id']}/forks", {"name": "a"}, expect=201)["fork"]
    base.push(fork["cloneUrl"], created["token"])
    reviews = []
    for title in ("one", "two"):
        packet = owner.ok("POST", f"/projects/{project['id']}/packets", {"title": title}, 201)
        packet_id = packet["packet"]["id"]
        agent.ok("POST", f"/projects/{project['id']}/packets/{packet_id}/claim", expect=201)
        body = {"packetId": packet_id, "forkId": fork["id"], "commit": commit}
        review = agent.ok("POST", f"/projects/{project['id']}/reviews", body, expect=202)
        reviews.append(review["review"]["id"])
    for review_id in reviews:  # settled, so /state changes only if an attack changes it
        owner.wait_receipt(project["id"], review_id)
    return Live(url, pid, home, owner, project["id"], other["id"], agent, reviews)


def _server_rss(live: Live) -> int:
    return rss_bytes(live.pid)


MALFORMED = [
    pytest.param(b"[" * 100_000 + b"]" * 100_000, DEPTH_REFUSED, id="nested-100000"),
    pytest.param(b'{"name": ' + b"7" * 5_000 + b"}", NUMBER_REFUSED, id="5000-digit-int"),
    pytest.param(b'{"name": "caf\xe9"}', "The body is not valid UTF-8.", id="not-utf8"),
    pytest.param(
        b'{"name": "\\ud800"}',
        "The body has a lone surrogate (an unpaired \\ud800-\\udfff escape) in a string.",
        id="lone-surrogate",
    ),
    pytest.param(b'{"name": NaN}', NOT_FINITE, id="nan"),
    pytest.param(b'{"name": -Infinity}', NOT_FINITE, id="infinity"),
    pytest.param(b'{"name": 1e999}', NOT_FINITE, id="overflowing-float"),
    pytest.param(b'{"name": ', "The body is not valid JSON.", id="truncated"),
]


@pytest.mark.parametrize(("body", "error"), MALFORMED)
def test_a_malformed_body_gets_its_400_and_changes_nothing(
    live: Live, body: bytes, error: str
) -> None:
    before = live.snapshot()
    with peak_of(lambda: _server_rss(live)) as server_memory:
        refused = live.raw(body)
    assert (refused.status_code, refused.json()) == (400, {"error": error})
    assert live.snapshot() == before
    print(
        f"server RSS growth for {len(body)} malformed bytes: {server_memory.growth / MIB:.2f} MiB"
    )
    # A 200 KB body of brackets must not cost the server more than a few of its own size.
    assert server_memory.growth < 32 * MIB, server_memory.growth


def test_a_malformed_flow_next_receipt_changes_nothing(live: Live) -> None:
    path = live.receipts_path(live.reviews[0])
    before = live.owner.ok("GET", path)
    refused = requests.post(
        live.url + path,
        data=b'{"type": "impl_review", "x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
        headers={"Authorization": f"Bearer {live.agent.token}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert (refused.status_code, refused.json()) == (400, {"error": DEPTH_REFUSED})
    assert live.owner.ok("GET", path) == before


def _five_mib() -> bytes:
    return b'{"name": "' + b"x" * (5 * MIB) + b'"}'


def test_a_5_mib_body_gets_413_without_the_server_buffering_it(live: Live) -> None:
    body = _five_mib()
    before = live.snapshot()
    with peak_of(lambda: _server_rss(live)) as server_memory:
        refused = live.raw(body)
    assert (refused.status_code, refused.json()) == (413, {"error": TOO_LARGE})
    assert live.snapshot() == before
    print(f"server RSS growth for a 5 MiB body: {server_memory.growth / MIB:.2f} MiB")
    assert server_memory.growth < len(body) // 4, server_memory.growth


def test_a_chunked_5_mib_body_gets_413(live: Live) -> None:
    body = _five_mib()
    chunks = (body[offset : offset + MIB] for offset in range(0, len(body), MIB))
    before = live.snapshot()
    with peak_of(lambda: _server_rss(live)) as server_memory:
        refused = live.raw(chunks)  # type: ignore[arg-type]  # a generator is sent chunked
    assert (refused.status_code, refused.json()) == (413, {"error": TOO_LARGE})
    assert live.snapshot() == before
    print(f"server RSS growth for a chunked 5 MiB body: {server_memory.growth / MIB:.2f} MiB")
    assert server_memory.growth < len(body) // 2, server_memory.growth


def test_one_oversized_receipt_is_refused_with_413(live: Live) -> None:
    path = live.receipts_path(live.reviews[1])
    before = live.owner.ok("GET", path)
    big = {**RECEIPT, "summary": "x" * REVIEW_RECEIPTS.receipt_bytes}
    status, body = live.agent.call("POST", path, big)
    assert status == 413
    assert body["error"].endswith(f"the limit is {REVIEW_RECEIPTS.receipt_bytes} bytes.")
    assert live.owner.ok("GET", path) == before


def test_a_reviews_receipts_are_bounded_in_total_bytes(live: Live) -> None:
    path = live.receipts_path(live.reviews[1])
    chunk = REVIEW_RECEIPTS.receipt_bytes - 1024
    fits = REVIEW_RECEIPTS.review_bytes // (chunk + 100)
    for index in range(fits):
        receipt = {**RECEIPT, "summary": f"{index:04d}" + "x" * (chunk - 200)}
        assert live.agent.call("POST", path, receipt)[0] == 201
    over = {**RECEIPT, "summary": "y" * (chunk - 200)}
    status, body = live.agent.call("POST", path, over)
    assert status == 409
    assert body["error"].endswith(f"the limit is {REVIEW_RECEIPTS.review_bytes} bytes per review.")
    assert len(live.owner.ok("GET", path)["receipts"]) == fits


def test_a_receipt_storm_is_bounded_per_review_and_other_projects_still_answer(
    live: Live,
) -> None:
    path = live.receipts_path(live.reviews[0])
    limit = REVIEW_RECEIPTS.per_review
    stop = threading.Event()
    answered: list[int] = []

    def unrelated_reads() -> None:
        while not stop.is_set() and len(answered) < 200:
            answered.append(live.owner.call("GET", f"/projects/{live.other_project}/state")[0])

    def post(index: int) -> int:
        return live.agent.call("POST", path, {**RECEIPT, "summary": f"storm {index}"})[0]

    reader = threading.Thread(target=unrelated_reads)
    reader.start()
    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(pool.map(post, range(limit + 10)))
    stop.set()
    reader.join(timeout=60)
    assert statuses.count(201) == limit
    assert statuses.count(409) == 10
    assert answered
    assert set(answered) == {200}
    status, body = live.agent.call("POST", path, {**RECEIPT, "summary": "one more"})
    full = f"The review already has {limit} review receipts; the limit is {limit} per review."
    assert (status, body) == (409, {"error": full})
    listing = live.owner.ok("GET", path)
    assert len(listing["receipts"]) == limit
    assert all(entry["classification"]["valid"] for entry in listing["receipts"])


def test_dns_rebinding_cannot_pass_the_origin_check(live: Live) -> None:
    before = live.snapshot()
    rebound = live.raw(
        json.dumps({"name": "rebound"}).encode(),
        Host="evil.example",
        Origin="http://evil.example",
    )
    assert (rebound.status_code, rebound.json()) == (
        403,
        {"error": "Cross-origin requests are refused."},
    )
    assert live.snapshot() == before
    own = live.raw(json.dumps({"name": "own"}).encode(), Origin=live.url)
    assert own.status_code == 201


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_home_and_database_are_private(live: Live) -> None:
    live.owner.ok("POST", "/projects", {"name": "write"}, expect=201)  # WAL files exist
    assert _mode(live.home) == 0o700
    for name in ("forkhorse.sqlite3", "forkhorse.sqlite3-wal", "forkhorse.sqlite3-shm"):
        assert _mode(live.home / name) == 0o600, name


def test_on_aws_the_api_function_refuses_the_same_bodies(
    aws: DynamoDbStore,
) -> None:
    api = load_function("api")
    deep = sample_event("api_create_project.json")
    deep["body"] = "[" * 100_000 + "]" * 100_000
    huge = sample_event("api_create_project.json")
    huge["body"] = '{"name": ' + "9" * 5_000 + "}"
    rebound = sample_event("api_create_project.json")
    rebound["headers"].update(host="evil.example", origin="http://evil.example")
    rebound["requestContext"]["domainName"] = "evil.example"
    for event, status, error in (
        (deep, 400, DEPTH_REFUSED),
        (huge, 400, NUMBER_REFUSED),
        (rebound, 403, "Cross-origin requests are refused."),
    ):
        answer = api.handler(event, FakeLambdaContext())
        assert (answer["statusCode"], json.loads(answer["body"])) == (status, {"error": error})
    assert aws.list_projects() == []


def test_an_unreadable_stored_receipt_is_flagged_not_a_failed_listing(live: Live) -> None:
    review = live.reviews[1]
    missing, corrupted = "0" * 64, "f" * 64  # no record; a record that fails its digest
    with closing(sqlite3.connect(live.home / "forkhorse.sqlite3", timeout=30)) as db, db:
        db.execute("INSERT INTO records (digest, chunk_count) VALUES (?, 1)", (corrupted,))
        db.execute(
            "INSERT INTO record_chunks (digest, idx, chunk) VALUES (?, 0, ?)",
            (corrupted, json.dumps(RECEIPT)),
        )
        db.executemany(
            "INSERT INTO review_receipts (review_id, digest) VALUES (?, ?)",
            [(review, missing), (review, corrupted)],
        )
    listing = live.owner.ok("GET", live.receipts_path(review))
    assert sorted(listing["unreadable"]) == [missing, corrupted]
    assert all(entry["classification"]["valid"] for entry in listing["receipts"])
