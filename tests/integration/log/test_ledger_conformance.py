"""One contract for the transparency log's ledger, run against SQLite and moto's DynamoDB:
appends land in order and once per key, a stale size loses, concurrent appenders never
share an index nor fork the tree, reads stop at a gap, publishing only moves forward, and
an intent stays until its entry is appended or it is dropped."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from forkhorse.adapters.dynamodb.transparency import (
    DynamoDbLogLedger,
    bundle_partition,
    entry_sort_key,
)
from forkhorse.adapters.sqlite.transparency import SqliteLogLedger
from forkhorse.domain.tiles import TILE_WIDTH
from forkhorse.ports.transparency import Appended, Intent, LogHead, LogLedger

from tests.support.aws import create_table_from_template
from tests.support.moto_atomic import atomic_mock_aws

NOW = datetime(2026, 12, 2, tzinfo=UTC)
THREADS = 4
APPENDS_PER_THREAD = 12
MAX_ATTEMPTS = 500  # lost races per append; far more than 4 appenders can cause


@dataclass
class Backend:
    """A ledger's storage: `open` gives another appender over it (its own connection or
    client), `drop` deletes one entry behind the ledger's back."""

    open: Callable[[], LogLedger]
    drop: Callable[[int], None]


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> Backend:
    database = tmp_path / "log.sqlite"
    opened: list[SqliteLogLedger] = []

    def open_ledger() -> LogLedger:
        opened.append(SqliteLogLedger(database))
        return opened[-1]

    def drop(index: int) -> None:
        opened[0]._conn.execute("DELETE FROM log_entries WHERE idx = ?", (index,))

    def close() -> None:
        for ledger in opened:
            ledger.close()

    request.addfinalizer(close)
    return Backend(open_ledger, drop)


def _dynamodb(tmp_path: Path, request: pytest.FixtureRequest) -> Backend:
    request.getfixturevalue("moto")
    client = boto3.client("dynamodb", region_name="us-east-1")
    table = create_table_from_template(client)

    def drop(index: int) -> None:
        key = {"pk": {"S": bundle_partition(index)}, "sk": {"S": entry_sort_key(index)}}
        client.delete_item(TableName=table, Key=key)

    return Backend(
        lambda: DynamoDbLogLedger(boto3.client("dynamodb", region_name="us-east-1"), table), drop
    )


@pytest.fixture
def moto(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with atomic_mock_aws(monkeypatch):
        yield


_BACKENDS = {"sqlite": _sqlite, "dynamodb": _dynamodb}


@pytest.fixture(params=sorted(_BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return _BACKENDS[request.param](tmp_path, request)


@pytest.fixture
def ledger(backend: Backend) -> LogLedger:
    return backend.open()


def _entry(n: int) -> bytes:
    return f'{{"entry":{n}}}'.encode()


def _append_all(ledger: LogLedger, count: int) -> list[bytes]:
    entries = [_entry(n) for n in range(ledger.head().size, ledger.head().size + count)]
    for entry in entries:
        size = ledger.head().size
        assert ledger.append(size, f"key-{entry.decode()}", entry, NOW) == Appended(size, True)
    return entries


def test_appends_land_in_order_and_read_back(ledger: LogLedger) -> None:
    assert ledger.head() == LogHead(size=0, published=0, checkpoint=None)
    assert ledger.entries(0, 10) == []
    entries = _append_all(ledger, 3)
    assert ledger.head().size == 3
    assert ledger.entries(0, 3) == entries
    assert ledger.entries(1, 10) == entries[1:]  # fewer: the ledger ends sooner
    assert ledger.entries(3, 5) == []
    assert [ledger.index_of(f"key-{e.decode()}") for e in entries] == [0, 1, 2]
    assert ledger.index_of("never-logged") is None


def test_a_key_is_logged_once_whatever_the_size_given(ledger: LogLedger) -> None:
    _append_all(ledger, 2)
    assert ledger.append(2, "key-again", b'{"first":true}', NOW) == Appended(2, True)
    assert ledger.append(3, "key-again", b'{"retried":true}', NOW) == Appended(2, False)
    assert ledger.append(0, "key-again", b'{"stale":true}', NOW) == Appended(2, False)
    assert ledger.head().size == 3
    assert ledger.entries(2, 3) == [b'{"first":true}']


def test_an_append_at_a_stale_size_loses_and_writes_nothing(ledger: LogLedger) -> None:
    entries = _append_all(ledger, 2)
    assert ledger.append(1, "late", b'{"late":true}', NOW) is None
    assert ledger.append(5, "early", b'{"early":true}', NOW) is None
    assert ledger.head().size == 2
    assert ledger.entries(0, 10) == entries
    assert ledger.index_of("late") is None
    assert ledger.index_of("early") is None


def _appender(backend: Backend, name: str, found: dict[str, int], start: threading.Barrier) -> None:
    ledger = backend.open()
    start.wait()
    for n in range(APPENDS_PER_THREAD):
        key, entry = f"{name}-{n}", f'{{"by":"{name}","n":{n}}}'.encode()
        for _ in range(MAX_ATTEMPTS):
            appended = ledger.append(ledger.head().size, key, entry, NOW)
            if appended is not None:
                found[key] = appended.index
                break
        else:
            raise AssertionError(f"{key} lost {MAX_ATTEMPTS} races in a row")


def test_concurrent_appenders_never_share_an_index_nor_fork(backend: Backend) -> None:
    found: dict[str, int] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def run(name: str) -> None:
        try:
            _appender(backend, name, found, start)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    total = THREADS * APPENDS_PER_THREAD
    ledger = backend.open()
    assert ledger.head().size == total
    assert sorted(found.values()) == list(range(total))  # every index taken exactly once
    logged = ledger.entries(0, total + 5)
    assert len(logged) == total
    for key, index in found.items():
        name, n = key.split("-")
        assert logged[index] == f'{{"by":"{name}","n":{n}}}'.encode(), key
        assert ledger.index_of(key) == index


def test_reads_stop_at_a_gap_and_cross_bundles_whole(ledger: LogLedger, backend: Backend) -> None:
    entries = _append_all(ledger, TILE_WIDTH + 4)
    edge = TILE_WIDTH - 2
    assert ledger.entries(edge, edge + 5) == entries[edge : edge + 5]  # two bundles, one run
    assert ledger.entries(0, TILE_WIDTH + 10) == entries
    backend.drop(TILE_WIDTH + 1)
    assert ledger.entries(edge, TILE_WIDTH + 4) == entries[edge : TILE_WIDTH + 1]
    assert ledger.entries(TILE_WIDTH + 2, TILE_WIDTH + 4) == entries[TILE_WIDTH + 2 :]
    backend.drop(3)
    assert ledger.entries(0, 10) == entries[:3]
    assert ledger.entries(3, 5) == []  # a run starts at `start` or not at all


def test_publishing_only_moves_forward(ledger: LogLedger) -> None:
    assert ledger.publish(0, 0, "empty") is True  # the first checkpoint, of the empty tree
    assert ledger.publish(0, 0, "empty again") is False  # not a larger tree
    assert ledger.head() == LogHead(size=0, published=0, checkpoint="empty", previous=0)
    _append_all(ledger, 3)  # appends after a publish created the head
    assert ledger.publish(0, 2, "two") is True
    assert ledger.publish(0, 3, "stale") is False  # over a checkpoint that is no longer newest
    assert ledger.publish(2, 1, "smaller") is False
    assert ledger.publish(2, 2, "same size") is False
    assert ledger.head() == LogHead(size=3, published=2, checkpoint="two", previous=0)
    assert ledger.publish(2, 3, "three") is True
    assert ledger.head() == LogHead(size=3, published=3, checkpoint="three", previous=2)


def test_the_first_checkpoint_may_be_of_any_size(ledger: LogLedger) -> None:
    _append_all(ledger, 2)
    assert ledger.publish(0, 2, "two") is True
    assert ledger.head() == LogHead(size=2, published=2, checkpoint="two", previous=0)


def test_the_newest_self_check_is_kept_apart_from_the_head(ledger: LogLedger) -> None:
    assert ledger.last_check() is None
    ledger.record_check('{"ok": true}')
    ledger.record_check('{"ok": false}')
    assert ledger.last_check() == '{"ok": false}'
    assert ledger.head() == LogHead(size=0, published=0, checkpoint=None)
    assert _append_all(ledger, 1) == ledger.entries(0, 1)
    assert ledger.last_check() == '{"ok": false}'


def test_intents_wait_oldest_first_until_appended_or_dropped(ledger: LogLedger) -> None:
    later = NOW + timedelta(seconds=1)
    ledger.intend("b", b'{"b":1}', NOW)
    ledger.intend("a", b'{"a":1}', later)
    ledger.intend("c", b'{"c":1}', NOW)
    assert ledger.intents(10) == [
        Intent("b", b'{"b":1}', NOW),
        Intent("c", b'{"c":1}', NOW),
        Intent("a", b'{"a":1}', later),
    ]
    assert [intent.key for intent in ledger.intents(2)] == ["b", "c"]
    ledger.intend("a", b'{"a":2}', NOW)  # noted again: the newer note replaces it
    assert ledger.intents(1) == [Intent("a", b'{"a":2}', NOW)]
    assert ledger.append(0, "b", b'{"b":1}', NOW) == Appended(0, True)
    ledger.intend("b", b'{"b":1}', later)  # a retried step notes it again
    assert ledger.append(1, "b", b'{"b":1}', NOW) == Appended(0, False)
    assert ledger.append(0, "c", b'{"c":1}', NOW) is None  # a lost race keeps its intent
    assert [intent.key for intent in ledger.intents(10)] == ["a", "c"]
    ledger.drop_intent("c")
    ledger.drop_intent("never-noted")
    assert [intent.key for intent in ledger.intents(10)] == ["a"]
    assert ledger.head().size == 1
