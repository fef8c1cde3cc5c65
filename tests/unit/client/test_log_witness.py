"""Every client is a witness (client/witness.py): the API client pins the server's log key
on first use and remembers the newest checkpoint it verified; later calls cost one GET of the
checkpoint when nothing changed, follow a log that appends, and refuse, naming what changed,
another key or origin, a rollback, a split view, rewritten history, tiles that do not match
and a log gone once pinned. The server's log here is the real ledger, tiles and signer."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from forkhorse.client.api import ForkhorseClient
from forkhorse.client.config import ClientConfig
from forkhorse.client.errors import LogUnavailable, WitnessRefused
from forkhorse.client.witness import LogWitness, WitnessState
from forkhorse.domain import merkle
from forkhorse.domain.tiles import tile_for
from securesystemslib.signer import CryptoSigner

from tests.support.served_log import NOW, SERVICE, ServedLog, log_entry, state_of


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedLog]:
    log = ServedLog.create(tmp_path / "server")
    log.append(3)
    yield log
    log.close()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "client" / "witness.json"


def _pinned(served: ServedLog, state: Path) -> None:
    with served.client(state) as client:
        client.list_projects()
    served.asked.clear()


def test_first_use_pins_the_key_and_checkpoint_and_an_unchanged_log_costs_one_get(
    served: ServedLog, state: Path
) -> None:
    with served.client(state) as client:
        client.list_projects()
        assert client.witnessed is not None
        assert client.witnessed.seen == "first"
    assert served.paths()[:2] == ["/log/key", "/log/checkpoint"]
    assert served.paths()[-1] == "/projects"
    assert all("authorization" not in r.headers for r in served.asked if r.url.path != "/projects")
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    pin = state_of(state)["servers"][SERVICE]  # type: ignore[index]
    assert pin["origin"] == served.origin
    assert pin["checkpoint"] == served.note()

    served.asked.clear()
    with served.client(state) as client:
        client.list_projects()
        client.list_projects()  # a read after the first: not witnessed again
        assert client.witnessed is not None
        assert client.witnessed.seen == "unchanged"
    assert served.paths() == ["/log/checkpoint", "/projects", "/projects"]


def test_a_log_that_appends_is_followed_and_each_change_is_witnessed(
    served: ServedLog, state: Path
) -> None:
    _pinned(served, state)
    for count, size in ((1, 4), (300, 304)):
        served.append(count)
        with served.client(state) as client:
            client.list_projects()
            witnessed = client.witnessed
        assert witnessed is not None
        assert witnessed.seen == "advanced"
        assert witnessed.checkpoint is not None
        assert witnessed.checkpoint.size == size
        assert state_of(state)["servers"][SERVICE]["checkpoint"] == served.note()  # type: ignore[index]


def test_a_mutating_call_is_witnessed_again(served: ServedLog, state: Path) -> None:
    served.answers["/projects/p/settings"] = httpx.Response(
        200, json={"settings": {"requireReceipt": True}}
    )
    with served.client(state) as client:
        client.list_projects()
        served.asked.clear()
        client.set_settings("p", True)
    assert served.paths() == ["/log/checkpoint", "/projects/p/settings"]


def _refused(served: ServedLog, state: Path) -> str:
    with served.client(state) as client, pytest.raises(WitnessRefused) as refused:
        client.list_projects()
    assert "/projects" not in served.paths(), "the call is not made on a refused log"
    return str(refused.value)


def test_a_rollback_is_refused_naming_both_sizes(served: ServedLog, state: Path) -> None:
    older = served.note()
    served.append(2)
    _pinned(served, state)
    served.served_note = older
    message = _refused(served, state)
    assert "rollback" in message
    assert "size 3" in message
    assert "size 5" in message
    assert state_of(state)["servers"][SERVICE]["checkpoint"] == served.note()  # type: ignore[index]


def test_a_split_view_is_refused_naming_both_roots(served: ServedLog, state: Path) -> None:
    _pinned(served, state)
    other = merkle.root([merkle.leaf_hash(log_entry(i, "other")) for i in range(3)])
    served.served_note = served.sign(3, other)
    message = _refused(served, state)
    assert "split view: two different trees of size 3" in message
    assert other.hex()[:16] in message


def test_rewritten_history_is_refused(served: ServedLog, state: Path, tmp_path: Path) -> None:
    _pinned(served, state)
    # Another history of 5 entries, signed with the same key, its tiles served alike.
    rewritten = ServedLog(tmp_path / "rewritten", served.signer)
    for index in range(5):
        rewritten.ledger.append(index, f"r{index}", log_entry(index, "rewritten"), NOW)
    rewritten.publishing.publish()
    served.files, served.served_note = rewritten.files, rewritten.note()
    message = _refused(served, state)
    assert "rewritten history: the tree of size 5 does not append to the tree of size 3" in message
    rewritten.close()


def test_tiles_that_do_not_match_the_signed_root_are_refused(
    served: ServedLog, state: Path
) -> None:
    _pinned(served, state)
    served.append(1)
    path = served.files.root / tile_for(0, 0, 4).path()
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    message = _refused(served, state)
    assert "the tiles do not hash to the checkpoint's root at size 4" in message
    assert "size 3" in message
    assert "size 4" in message


def test_another_key_is_refused_until_the_pin_is_forgotten(served: ServedLog, state: Path) -> None:
    _pinned(served, state)
    rotated = CryptoSigner.generate_ecdsa()
    served.signer = rotated
    served.named_key = served.key
    served.served_note = served.sign(3, _root(served))
    message = _refused(served, state)
    assert "its key changed" in message
    assert "witness forget --server https://service.test" in message
    witness = LogWitness(WitnessState(state))
    assert witness.forget(SERVICE) is not None
    with served.client(state) as client:
        client.list_projects()
        assert client.witnessed is not None
        assert client.witnessed.seen == "first"


def test_another_origin_is_refused(served: ServedLog, state: Path) -> None:
    _pinned(served, state)
    served.origin = "forkhorse.test/elsewhere"
    served.named_key = served.key
    served.served_note = served.sign(3, _root(served))
    message = _refused(served, state)
    assert "'forkhorse.test/witness'" in message
    assert "'forkhorse.test/elsewhere'" in message


def _root(served: ServedLog) -> bytes:
    return merkle.root([merkle.leaf_hash(log_entry(i)) for i in range(3)])


def test_a_server_without_a_log_is_tolerated_until_one_was_pinned(
    served: ServedLog, state: Path
) -> None:
    served.named_key = None
    served.answers["/log/checkpoint"] = httpx.Response(404)
    with served.client(state) as client:
        client.list_projects()
        assert client.witnessed is not None
        assert client.witnessed.seen == "no-log"
    assert not state.exists()

    served.named_key = served.key
    del served.answers["/log/checkpoint"]
    _pinned(served, state)
    served.named_key = None
    served.answers["/log/checkpoint"] = httpx.Response(404)
    message = _refused(served, state)
    assert "serves no checkpoint" in message
    assert "size 3" in message


def test_a_log_that_cannot_be_read_is_an_unavailable_service(
    served: ServedLog, state: Path
) -> None:
    _pinned(served, state)
    served.answers["/log/checkpoint"] = httpx.Response(503, json={"error": "Busy."})
    with served.client(state) as client, pytest.raises(LogUnavailable, match="answered 503"):
        client.list_projects()


def test_witness_off_asks_nothing_of_the_log(served: ServedLog) -> None:
    config = ClientConfig(SERVICE, "t")
    transport = httpx.MockTransport(served.handle)
    with ForkhorseClient(config, transport=transport, witness=False) as client:
        client.list_projects()
    assert served.paths() == ["/projects"]


@pytest.mark.parametrize("status", [401, 403, 500])
def test_before_a_pin_a_log_key_that_cannot_be_read_is_no_log(
    served: ServedLog, state: Path, status: int
) -> None:
    # An older deployment answers /log/key without its token as any unknown path: nothing
    # is pinned yet, so nothing is trusted and nothing is lost by going on.
    served.answers["/log/key"] = httpx.Response(status, json={"error": "No."})
    with served.client(state) as client:
        client.list_projects()
        assert client.witnessed is not None
        assert client.witnessed.seen == "no-log"
    assert not state.exists()


def test_a_checkpoint_larger_than_a_log_serves_is_refused(served: ServedLog, state: Path) -> None:
    _pinned(served, state)
    served.answers["/log/checkpoint"] = httpx.Response(200, content=b"x" * 100_000)
    message = _refused(served, state)
    assert "larger than a log file can be" in message
