"""`forkhorse verify` as a user runs it (exit 0/1/2, the failing check named), and the
documented verification with standard tools (base64, printf, openssl)."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
from forkhorse.cli import main
from forkhorse.domain.limits import ATTESTATION
from securesystemslib.signer import CryptoSigner

from tests.support.attest import (
    COMMIT,
    OTHER_COMMIT,
    envelope_bytes,
    fabricated_record,
    key_file,
    signed_receipt,
)


@pytest.fixture(scope="module")
def signer() -> CryptoSigner:
    return CryptoSigner.generate_ecdsa()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_good_envelope_verifies_with_exit_0(
    tmp_path: Path, signer: CryptoSigner, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope = _write(tmp_path / "e.json", envelope_bytes(signed_receipt(signer)))
    key = _write(tmp_path / "keys.json", key_file(signer))
    args = ["--key", str(key), "--commit", COMMIT, "--require-passed"]
    code = main(["verify", str(envelope), *args])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"ok  signature: signed by key {signer.public_key.keyid}" in out
    assert out.endswith("verified\n")


def test_a_pem_public_key_verifies_too(tmp_path: Path, signer: CryptoSigner) -> None:
    envelope = _write(tmp_path / "e.json", envelope_bytes(signed_receipt(signer)))
    pem = _write(tmp_path / "key.pem", signer.public_key.keyval["public"].encode())
    assert main(["verify", str(envelope), "--key", str(pem)]) == 0


def test_a_refusal_exits_1_and_names_the_check(
    tmp_path: Path, signer: CryptoSigner, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope = _write(tmp_path / "e.json", envelope_bytes(signed_receipt(signer)))
    key = _write(tmp_path / "keys.json", key_file(signer))
    assert main(["verify", str(envelope), "--key", str(key), "--commit", OTHER_COMMIT]) == 1
    err = capsys.readouterr().err
    assert err == f"refused: subject: The envelope is about commit {COMMIT}, not {OTHER_COMMIT}.\n"


def test_mocked_evidence_exits_1_unless_shown(tmp_path: Path, signer: CryptoSigner) -> None:
    record = fabricated_record(evidence="mocked-worker-loader")
    envelope = _write(tmp_path / "e.json", envelope_bytes(signed_receipt(signer, record)))
    key = _write(tmp_path / "keys.json", key_file(signer))
    assert main(["verify", str(envelope), "--key", str(key)]) == 1
    assert main(["verify", str(envelope), "--key", str(key), "--show-mocked"]) == 0


def test_unreadable_input_exits_2(
    tmp_path: Path, signer: CryptoSigner, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _write(tmp_path / "keys.json", key_file(signer))
    assert main(["verify", str(tmp_path / "missing.json"), "--key", str(key)]) == 2
    garbage = _write(tmp_path / "key.txt", b"not a key")
    envelope = _write(tmp_path / "e.json", envelope_bytes(signed_receipt(signer)))
    assert main(["verify", str(envelope), "--key", str(garbage)]) == 2
    assert "neither PEM nor JSON" in capsys.readouterr().err


def test_an_oversized_envelope_is_not_read_whole(tmp_path: Path, signer: CryptoSigner) -> None:
    key = _write(tmp_path / "keys.json", key_file(signer))
    huge = _write(tmp_path / "huge.json", b" " * (ATTESTATION.envelope_bytes + 1))
    assert main(["verify", str(huge), "--key", str(key)]) == 2


def test_standard_tools_verify_the_signature(tmp_path: Path, signer: CryptoSigner) -> None:
    """The README's recipe: rebuild the DSSE PAE with printf and check it with openssl."""
    envelope = signed_receipt(signer)
    payload = base64.b64decode(envelope["payload"])
    payload_type = envelope["payloadType"].encode()
    pae = b"DSSEv1 %d %b %d %b" % (len(payload_type), payload_type, len(payload), payload)
    _write(tmp_path / "pae.bin", pae)
    _write(tmp_path / "sig.der", base64.b64decode(envelope["signatures"][0]["sig"]))
    _write(tmp_path / "key.pem", signer.public_key.keyval["public"].encode())
    done = _openssl_verify(tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "Verified OK")
    _write(tmp_path / "pae.bin", pae.replace(b'"passed"', b'"failed"', 1))
    assert _openssl_verify(tmp_path).returncode == 1


def _openssl_verify(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["openssl", "dgst", "-sha256", "-verify", "key.pem", "-signature", "sig.der", "pae.bin"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=30,
    )
