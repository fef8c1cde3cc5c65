"""`forkhorse gc` on a local home: a dry run lists, a real run removes, once past the grace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from forkhorse.adapters.sqlite_store import SqliteStore
from forkhorse.cli import main
from forkhorse.records import get_record, put_record

from tests.support.store import record


def _home_with_garbage(home: Path) -> tuple[str, str]:
    """An unreferenced record and a crashed put's chunks, both two hours old."""
    store = SqliteStore(home)
    old = datetime.now(UTC) - timedelta(hours=2)
    unreferenced = put_record(store, record(generation="stale"), old)

    def crash(*args: object) -> None:
        raise RuntimeError("power cut")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "_write_manifest", crash)
        with pytest.raises(RuntimeError):
            put_record(store, record(generation="crashed"), old)
    orphan = next(s.digest for s in store.stale_records(datetime.now(UTC)) if not s.has_manifest)
    store.close()
    return unreferenced, orphan


def test_gc_lists_then_removes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    unreferenced, orphan = _home_with_garbage(home)

    assert main(["gc", "--home", str(home), "--grace-seconds", "10800"]) == 0
    assert "removed 0 records, 0 orphan chunk sets" in capsys.readouterr().out

    assert main(["gc", "--home", str(home), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert f"would remove record {unreferenced}" in dry
    assert f"would remove orphan chunks {orphan}" in dry

    assert main(["gc", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert f"removed record {unreferenced}" in out
    assert "removed 1 records, 1 orphan chunk sets" in out
    store = SqliteStore(home)
    assert get_record(store, unreferenced) is None
    assert list(store.stale_records(datetime.now(UTC))) == []
    store.close()


def test_gc_refuses_a_home_without_state(tmp_path: Path) -> None:
    assert main(["gc", "--home", str(tmp_path / "missing")]) == 2
