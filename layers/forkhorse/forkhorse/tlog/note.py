"""C2SP signed notes with the deployment's key: ECDSA P-256 over SHA-256, signature type
0x02 (c2sp.org/signed-note), the envelope of the transparency log's checkpoints.

A note is its text (ending in a newline), a blank line, and signature lines
`— <key name> base64(key ID || signature)`; the key ID of a type 0x02 key is the first four
bytes of SHA-256 over its DER SubjectPublicKeyInfo, and the signature is ASN.1 DER over the
text's SHA-256, as securesystemslib's ECDSA signers (the local key, KMS) make it. Opening a
note follows the spec: signatures of unknown keys are ignored, a known key's signature that
fails rejects the note, and a note with no verified signature is rejected.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

if TYPE_CHECKING:  # the client opens notes and loads no signer
    from forkhorse.ports.signer import EvidenceSigner

DASH = "\u2014"
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")


class NoteRefused(ValueError):
    """Not a note signed by the expected key; the message says why."""


def key_id(public_pem: str) -> bytes:
    """The 4-byte ID of a type 0x02 key: SHA-256 of its DER SubjectPublicKeyInfo."""
    spki = _public_key(public_pem).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(spki).digest()[:4]


def sign_note(text: str, name: str, signer: EvidenceSigner) -> str:
    """The note: `text`, a blank line, and the deployment key's signature line."""
    _check_text(text, name)
    signature = bytes.fromhex(signer.sign(text.encode()).signature)
    ident = key_id(signer.public_key.keyval["public"])
    return f"{text}\n{DASH} {name} {base64.b64encode(ident + signature).decode()}\n"


def open_note(note: str, name: str, public_pem: str) -> str:
    """The note's text once the key named `name` verifies it; NoteRefused otherwise."""
    text, lines = _split(note)
    ident, key = key_id(public_pem), _public_key(public_pem)
    verified = False
    for line in lines:
        signer, raw = _signature_line(line)
        if signer != name or raw[:4] != ident:
            continue  # another key's signature: ignored, as the spec says
        try:
            key.verify(raw[4:], text.encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature as bad:
            raise NoteRefused(f"the signature of {name} does not verify") from bad
        verified = True
    if not verified:
        raise NoteRefused(f"the note carries no signature of {name}")
    return text


def _check_text(text: str, name: str) -> None:
    if not text.endswith("\n") or _CONTROL.search(text):
        raise NoteRefused("a note's text ends with a newline and holds no control character")
    if not name or any(c.isspace() for c in name) or "+" in name:
        raise NoteRefused("a key name is non-empty, without spaces or '+'")


def _split(note: str) -> tuple[str, list[str]]:
    if _CONTROL.search(note) or not note.endswith("\n"):
        raise NoteRefused("a note ends with a newline and holds no control character")
    cut = note.rfind("\n\n")
    if cut < 0:
        raise NoteRefused("a note has a blank line before its signatures")
    return note[: cut + 1], note[cut + 2 :].splitlines()


def _signature_line(line: str) -> tuple[str, bytes]:
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != DASH:
        raise NoteRefused(f"not a signature line: {line[:80]!r}")
    try:
        raw = base64.b64decode(parts[2], validate=True)
    except (binascii.Error, ValueError) as invalid:
        raise NoteRefused("a signature is not standard base64") from invalid
    if len(raw) < 5:
        raise NoteRefused("a signature is shorter than its key ID")
    return parts[1], raw


def _public_key(public_pem: str) -> ec.EllipticCurvePublicKey:
    key = serialization.load_pem_public_key(public_pem.encode())
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise NoteRefused("a type 0x02 key here is ECDSA P-256")
    return key
