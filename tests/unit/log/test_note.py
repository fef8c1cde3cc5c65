"""C2SP signed notes (attest/note.py) with an ECDSA P-256 key, signature type 0x02: the
note a checkpoint travels in verifies by the spec's rules, checked here by a verifier
written from the spec with `cryptography` alone, and any edit is refused."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from forkhorse.domain.checkpoint import Checkpoint
from forkhorse.domain.merkle import EMPTY_ROOT
from forkhorse.tlog.note import NoteRefused, key_id, open_note, sign_note
from securesystemslib.signer import CryptoSigner

NAME = "forkhorse.example/log"
TEXT = Checkpoint(NAME, 0, EMPTY_ROOT).body()


@pytest.fixture(scope="module")
def signer() -> CryptoSigner:
    return CryptoSigner.generate_ecdsa()


def _pem(signer: CryptoSigner) -> str:
    pem: str = signer.public_key.keyval["public"]
    return pem


def test_a_signed_checkpoint_opens_and_an_independent_verifier_agrees(
    signer: CryptoSigner,
) -> None:
    note = sign_note(TEXT, NAME, signer)
    assert open_note(note, NAME, _pem(signer)) == TEXT
    # From the spec alone: text, blank line, "— name base64(keyID || DER signature)".
    text, signature_line = note.split("\n\n")
    dash, name, encoded = signature_line.rstrip("\n").split(" ")
    raw = base64.b64decode(encoded)
    key = serialization.load_pem_public_key(_pem(signer).encode())
    assert isinstance(key, ec.EllipticCurvePublicKey)
    spki = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert (dash, name, raw[:4]) == ("\u2014", NAME, hashlib.sha256(spki).digest()[:4])
    key.verify(raw[4:], (text + "\n").encode(), ec.ECDSA(hashes.SHA256()))
    assert key_id(_pem(signer)) == raw[:4]


def test_an_edited_note_is_refused(signer: CryptoSigner) -> None:
    note = sign_note(TEXT, NAME, signer)
    forged = note.replace("\n0\n", "\n1\n", 1)
    with pytest.raises(NoteRefused, match="does not verify"):
        open_note(forged, NAME, _pem(signer))


def test_only_the_expected_keys_signature_counts(signer: CryptoSigner) -> None:
    other = CryptoSigner.generate_ecdsa()
    by_other = sign_note(TEXT, NAME, other)
    with pytest.raises(NoteRefused, match="no signature of"):
        open_note(by_other, NAME, _pem(signer))  # same name, other key ID: ignored
    both = by_other + sign_note(TEXT, NAME, signer).split("\n\n")[1]
    assert open_note(both, NAME, _pem(signer)) == TEXT


@pytest.mark.parametrize(
    "note",
    [
        "no blank line\n",
        TEXT + "\n\u2014 name\n",
        TEXT + "\n\u2014 name not-base64!\n",
        TEXT + "\n- name AAAAAAAA\n",
        TEXT.replace("\n", "\r\n", 1) + "\n\u2014 name AAAAAAAA\n",
    ],
)
def test_what_is_not_a_note_is_refused(signer: CryptoSigner, note: str) -> None:
    with pytest.raises(NoteRefused):
        open_note(note, NAME, _pem(signer))


def test_a_text_without_its_newline_is_not_signed(signer: CryptoSigner) -> None:
    with pytest.raises(NoteRefused, match="ends with a newline"):
        sign_note(TEXT[:-1], NAME, signer)
