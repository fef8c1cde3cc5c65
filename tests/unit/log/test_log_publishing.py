"""Publishing the log (service/log_publishing.py) over the real local adapters: every
checkpoint verifies from the files alone and appends to the one before, old partial tiles
go while a client holding an old checkpoint still reads its tree, a crash mid-publish is
finished by the next one, and the self-check names what was changed behind its back."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from forkhorse.adapters.disk_log import DiskLogFiles
from forkhorse.adapters.sqlite.transparency import SqliteLogLedger
from forkhorse.domain import merkle
from forkhorse.domain.checkpoint import Checkpoint
from forkhorse.domain.log_entries import ImportSubject, facts_digest, make_entry
from forkhorse.domain.tiles import TILE_WIDTH, tiles_of
from forkhorse.ports.transparency import Appended, Intent, LogHead
from forkhorse.service.log_publishing import LedgerBroken, LogPublishing, LogSelfCheck
from forkhorse.service.transparency import TransparencyLog
from forkhorse.tlog.verify import (
    LogKey,
    LogRefused,
    all_entries,
    check_append_only,
    check_inclusion,
    fetch_checkpoint,
)
from securesystemslib.signer import CryptoSigner

ORIGIN = "forkhorse.test/log"
NOW = datetime(2026, 12, 2, tzinfo=UTC)


class Clock:
    def now(self) -> datetime:
        return NOW


@dataclass
class Log:
    ledger: SqliteLogLedger
    files: DiskLogFiles
    key: LogKey
    publishing: LogPublishing
    root_dir: Path

    def append(self, count: int = 1) -> list[bytes]:
        added = []
        for _ in range(count):
            size = self.ledger.head().size
            entry = _entry(size)
            assert self.ledger.append(size, f"k{size}", entry, NOW) == Appended(size, True)
            added.append(entry)
        return added

    def checkpoint(self) -> Checkpoint:
        return fetch_checkpoint(self.files, self.key)[0]


def _entry(index: int) -> bytes:
    subject = ImportSubject(commit=f"{index:040x}")
    return make_entry(f"p{index % 3}", subject, facts_digest(subject), f"import/{index}").to_bytes()


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    signer = CryptoSigner.generate_ecdsa()
    key = LogKey(ORIGIN, signer.public_key.keyval["public"])
    ledger = SqliteLogLedger(tmp_path / "db.sqlite3")
    files = DiskLogFiles(tmp_path / "log")
    yield Log(
        ledger, files, key, LogPublishing(ledger, files, key, signer, Clock()), tmp_path / "log"
    )
    ledger.close()


def test_each_publish_verifies_and_appends_to_the_one_before(log: Log) -> None:
    log.publishing.publish()
    seen = [log.checkpoint()]
    assert (seen[0].size, seen[0].root) == (0, merkle.EMPTY_ROOT)
    entries: list[bytes] = []
    for step in [1, 1, 3, 250, 1, 1, 300]:
        entries += log.append(step)
        log.publishing.publish()
        seen.append(log.checkpoint())
        check_append_only(log.files, seen[-2], seen[-1])
    final = seen[-1]
    assert final.size == len(entries) == 557
    assert final.root == merkle.root([merkle.leaf_hash(e) for e in entries])
    assert all_entries(log.files, final) == entries
    check_inclusion(log.files, final, 300, entries[300])
    with pytest.raises(LogRefused, match="not the entry the log signed"):
        check_inclusion(log.files, final, 300, entries[301])
    # An older checkpoint's tree still reads, though its partial tiles were dropped.
    assert all_entries(log.files, seen[3]) == entries[: seen[3].size]
    assert sorted(p.name for p in (log.root_dir / "tile/0").rglob("*") if p.is_file()) == [
        "000", "001", "1", "45"]  # fmt: skip


def test_an_older_or_forked_checkpoint_is_refused_naming_it(log: Log) -> None:
    log.append(5)
    log.publishing.publish()
    five = log.checkpoint()
    log.append(2)
    log.publishing.publish()
    seven = log.checkpoint()
    with pytest.raises(LogRefused, match=r"rollback: .* size 5, older than the size 7"):
        check_append_only(log.files, seven, five)
    forked = Checkpoint(ORIGIN, 7, merkle.root([merkle.leaf_hash(b"x")] * 7))
    with pytest.raises(LogRefused, match="split view: two different trees of size 7"):
        check_append_only(log.files, forked, seven)
    rewritten = Checkpoint(ORIGIN, 5, merkle.root([merkle.leaf_hash(b"x")] * 5))
    with pytest.raises(LogRefused, match=r"rewritten history: .* size 7 does not append .* size 5"):
        check_append_only(log.files, rewritten, seven)


def test_the_second_tile_level_is_built_from_full_tiles(tmp_path: Path) -> None:
    """65,536 + 300 entries: tiles at level 2 exist and the root is every leaf's."""
    signer = CryptoSigner.generate_ecdsa()
    key = LogKey(ORIGIN, signer.public_key.keyval["public"])
    entries = [i.to_bytes(4, "big") for i in range(TILE_WIDTH**2 + 300)]
    ledger = MemoryLedger(entries[:1000])
    files = DiskLogFiles(tmp_path / "log")
    publishing = LogPublishing(ledger, files, key, signer, Clock())
    publishing.publish()
    ledger.rows = entries
    publishing.publish()
    checkpoint = fetch_checkpoint(files, key)[0]
    assert checkpoint.root == merkle.root([merkle.leaf_hash(e) for e in entries])
    assert files.read("tile/2/000.p/1") is not None
    assert files.read("tile/1/000") is not None
    assert files.read("tile/1/001.p/1") is not None
    check_inclusion(files, checkpoint, 65_700, entries[65_700])


@pytest.mark.parametrize("crash_at", [1, 2, 3], ids=["bundle", "hash-tile", "checkpoint-file"])
def test_a_crash_mid_publish_is_finished_by_the_next_publish(log: Log, crash_at: int) -> None:
    log.append(3)
    log.publishing.publish()
    entries = log.append(2)
    writes = 0
    real_write = log.files.write

    def crash_on_write(path: str, data: bytes) -> None:
        nonlocal writes
        writes += 1
        if writes == crash_at:
            raise OSError("power lost")
        real_write(path, data)

    log.files.write = crash_on_write  # type: ignore[method-assign]
    with pytest.raises(OSError, match="power lost"):
        log.publishing.publish()
    log.files.write = real_write  # type: ignore[method-assign]
    assert log.checkpoint().size == 3  # the file names no half-written tile
    log.publishing.publish()
    assert log.checkpoint().size == 5
    assert all_entries(log.files, log.checkpoint())[3:] == entries


def test_tiles_a_power_loss_took_are_rewritten_from_the_ledger(log: Log) -> None:
    log.append(300)
    log.publishing.publish()
    entries = log.append(2)
    log.publishing.publish()
    lost = ["tile/entries/001.p/46", "tile/0/001.p/46", "checkpoint"]
    for path in lost:
        (log.root_dir / path).unlink()
    log.publishing.publish()
    assert all_entries(log.files, log.checkpoint())[-2:] == entries


def test_a_ledger_missing_a_counted_entry_is_never_published(log: Log) -> None:
    log.append(4)
    with sqlite3.connect(log.root_dir.parent / "db.sqlite3") as db:
        db.execute("DELETE FROM log_entries WHERE idx = 2")
    with pytest.raises(LedgerBroken, match="lacks entry 2"):
        log.publishing.publish()


def test_the_self_check_names_an_edited_bundle_and_an_edited_ledger_row(log: Log) -> None:
    check = LogSelfCheck(log.ledger, log.files, log.key, Clock())
    entries = log.append(6)
    log.publishing.publish()
    assert check.run()["ok"] is True
    assert json.loads(log.ledger.last_check() or "{}")["size"] == 6
    with sqlite3.connect(log.root_dir.parent / "db.sqlite3") as db:
        db.execute("UPDATE log_entries SET entry = ? WHERE idx = 4", (_entry(40),))
    report = check.run(full=True)
    assert report["problems"] == ["ledger row 4 is not the logged entry"]
    bundle = log.root_dir / "tile/entries/000.p/6"
    edited = bundle.read_bytes().replace(entries[1], _entry(7))
    bundle.write_bytes(edited)
    report = check.run(full=True)
    assert not report["ok"]
    assert "entry 1" in report["problems"][0]


def test_a_partial_tile_the_log_grew_past_is_served_as_a_prefix(log: Log) -> None:
    served = TransparencyLog(log.ledger, log.files, _Publishing(log), Clock(), log.key)
    log.append(5)
    log.publishing.publish()
    five = served.tile("tile/entries/000.p/5")
    for _ in range(3):
        log.append(1)
        log.publishing.publish()
    assert log.files.read("tile/entries/000.p/5") is None  # dropped two publishes on
    assert served.tile("tile/entries/000.p/5") == five
    assert served.tile("tile/0/000.p/5") == log.files.read("tile/0/000.p/8")[: 5 * 32]  # type: ignore[index]
    assert served.tile("tile/0/000.p/9") is None  # past the published tree
    assert served.tile("tile/0/x000/005") is None  # not a tile's path


@dataclass
class _Publishing:
    log: Log

    def request(self) -> None:
        self.log.publishing.publish()


def test_every_tile_the_publish_writes_is_one_the_tree_has(log: Log) -> None:
    log.append(TILE_WIDTH + 1)
    log.publishing.publish()
    written = {p.relative_to(log.root_dir).as_posix() for p in log.root_dir.rglob("*")
               if p.is_file() and p.name != "checkpoint"}  # fmt: skip
    assert written == {tile.path() for tile in tiles_of(TILE_WIDTH + 1)}


@dataclass
class MemoryLedger:
    """A ledger over a list, for a tree too large to append row by row in a unit test. It
    publishes only: what publishing never calls raises, so a call to it fails the test."""

    rows: list[bytes]
    published: int = 0
    previous: int = 0
    checkpoint: str | None = None

    def head(self) -> LogHead:
        return LogHead(len(self.rows), self.published, self.checkpoint, self.previous)

    def append(self, size: int, key: str, entry: bytes, now: datetime) -> Appended | None:
        raise NotImplementedError

    def index_of(self, key: str) -> int | None:
        return None

    def intend(self, key: str, entry: bytes, now: datetime) -> None:
        raise NotImplementedError

    def intents(self, limit: int) -> list[Intent]:
        return []

    def drop_intent(self, key: str) -> None:
        raise NotImplementedError

    def entries(self, start: int, end: int) -> list[bytes]:
        return self.rows[start:end]

    def publish(self, published: int, size: int, checkpoint: str) -> bool:
        self.previous, self.published, self.checkpoint = self.published, size, checkpoint
        return True

    def record_check(self, report: str) -> None:
        raise NotImplementedError

    def last_check(self) -> str | None:
        return None
