"""The transparency log's cost (issue 33): one append with its signed checkpoint against
the record's put and signing it follows (same key, same SQLite file, one run), and the log's
size per 1,000 receipts (tiles and ledger rows, with the superseded partial tiles deleted)."""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from forkhorse.adapters.disk_log import DiskLogFiles
from forkhorse.adapters.log_publisher import InlinePublisher
from forkhorse.adapters.signing.local_key import LocalKeyring
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.adapters.sqlite.attestations import SqliteAttestations
from forkhorse.adapters.sqlite.transparency import SqliteLogLedger
from forkhorse.attest.attestor import Attestor
from forkhorse.domain.receipts import ReceiptRecord
from forkhorse.ports.clock import SystemClock
from forkhorse.records import put_record
from forkhorse.service.log_events import GateLog, receipt_entry
from forkhorse.service.log_publishing import LogPublishing
from forkhorse.service.transparency import TransparencyLog
from forkhorse.tlog.verify import LogKey, all_entries, fetch_checkpoint

from tests.support.bench import BenchFigures
from tests.support.store import T0, record

pytestmark = pytest.mark.bench
RECEIPTS = 1000


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def test_append_latency_and_size_per_1000_receipts(
    tmp_path: Path, bench_figures: BenchFigures
) -> None:
    store = SqliteStore(tmp_path)
    signer = LocalKeyring(tmp_path).signer()
    attestor = Attestor(SqliteAttestations(store.path), signer)
    ledger = SqliteLogLedger(store.path)
    files = DiskLogFiles(tmp_path / "log")
    key = LogKey("forkhorse.bench/log", signer.public_key.keyval["public"])
    clock = SystemClock()
    publisher = InlinePublisher(LogPublishing(ledger, files, key, signer, clock), tmp_path / "l")
    gate = GateLog(TransparencyLog(ledger, files, publisher, clock, key), attestor)
    signing, appending = [], []
    try:
        for index in range(RECEIPTS):
            rec: ReceiptRecord = record(generation=str(uuid.uuid4()), checks=4)
            started = time.perf_counter()
            digest = put_record(store, rec, T0)
            attestor.attest_receipt(rec, digest, T0, gate.intending_receipt(rec, digest))
            signed = time.perf_counter()
            gate.receipt(rec, digest)
            appended = time.perf_counter()
            signing.append(signed - started)
            appending.append(appended - signed)
            if index == 0:
                entry_bytes = len(receipt_entry(rec, digest, None).to_bytes())
        checkpoint, _ = fetch_checkpoint(files, key)
        assert checkpoint.size == RECEIPTS
        assert len(all_entries(files, checkpoint)) == RECEIPTS
        tiles = sum(p.stat().st_size for p in (tmp_path / "log").rglob("*") if p.is_file())
        with sqlite3.connect(store.path) as db:
            rows = db.execute("SELECT SUM(LENGTH(entry) + LENGTH(key)) FROM log_entries")
            ledger_bytes = int(rows.fetchone()[0])
    finally:
        ledger.close()
        attestor.close()
        store.close()
    sign, append = _median(signing), _median(appending)
    ratio = append / sign
    per_thousand = (tiles + ledger_bytes) / RECEIPTS * 1000 / 1024
    print(
        f"\n[bench] log append + signed checkpoint: {append * 1000:.2f} ms median "
        f"(p90 {sorted(appending)[int(RECEIPTS * 0.9)] * 1000:.2f} ms); the record's put and "
        f"signing {sign * 1000:.2f} ms; ratio {ratio:.2f}x\n[bench] log size per 1,000 receipts: "
        f"{per_thousand:.0f} KiB (tiles {tiles / 1024:.0f} KiB, ledger rows "
        f"{ledger_bytes / 1024:.0f} KiB; an entry is {entry_bytes} bytes)"
    )
    bench_figures.record("log-append", ratio)
    bench_figures.record("log-size", per_thousand)
