"""`forkhorse keys list|rotate` on a local home: the key is made 0600 in a 0700 directory at
first use, rotation retires the private key and keeps the public one listed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.cli import main
from forkhorse.ports.clock import SystemClock
from forkhorse.wiring.local import local_attestor, local_public_keys


def _first_start(home: Path) -> str:
    store = SqliteStore(home)
    attestor = local_attestor(home, store.path, SystemClock())
    assert attestor.signer is not None
    keyid = attestor.signer.public_key.keyid
    attestor.close()
    store.close()
    return keyid


def test_the_first_start_makes_a_private_key(tmp_path: Path) -> None:
    keyid = _first_start(tmp_path)
    keys = tmp_path / "keys"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    assert stat.S_IMODE((keys / f"{keyid}.key").stat().st_mode) == 0o600
    assert _first_start(tmp_path) == keyid  # the second start keeps it


def test_rotate_then_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _first_start(tmp_path)
    assert main(["keys", "rotate", "--home", str(tmp_path)]) == 0
    new = capsys.readouterr().out.split()[3].rstrip(";")
    assert new != old
    assert not (tmp_path / "keys" / f"{old}.key").exists()
    assert (tmp_path / "keys" / f"{new}.key").exists()
    listed = {keyid: current for keyid, _, current in local_public_keys(tmp_path)}
    assert listed == {old: False, new: True}
    assert main(["keys", "list", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"# keyid {new} (current)" in out
    assert f"# keyid {old}\n" in out
    assert "PRIVATE" not in out


def test_rotating_a_home_without_state_exits_2(tmp_path: Path) -> None:
    assert main(["keys", "rotate", "--home", str(tmp_path / "nothing")]) == 2
    assert main(["keys", "list", "--home", str(tmp_path / "nothing")]) == 2
