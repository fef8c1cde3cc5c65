"""A C2SP signed-note verifier and entry-bundle reader written from the specs alone
(c2sp.org/signed-note, c2sp.org/tlog-checkpoint, c2sp.org/tlog-tiles), sharing no code with
`forkhorse.tlog`: the interop and tamper tests read Forkhorse's log with them.

From the spec: a note is UTF-8 text ending in a newline, a blank line, then signature lines
`— <name> <base64(key ID || signature)>`. For an ECDSA P-256 key (type 0x02 here) the key ID is
the first four bytes of SHA-256 over the DER SubjectPublicKeyInfo, and the signature is an
ASN.1 DER ECDSA signature over SHA-256 of the text. A checkpoint's text is the origin, the
tree size in decimal and the root hash in standard base64, one per line. An entry bundle
is its entries one after another, each a big-endian uint16 length and the entry's bytes.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

EM_DASH = "\u2014"


@dataclass(frozen=True)
class SpecCheckpoint:
    origin: str
    size: int
    root: bytes


def verify_checkpoint(note: str, name: str, public_pem: str) -> SpecCheckpoint:
    """The checkpoint the note signs, once the key `name` verifies; AssertionError if not."""
    text, _, signatures = note.rpartition("\n\n")
    text += "\n"
    key = serialization.load_pem_public_key(public_pem.encode())
    assert isinstance(key, ec.EllipticCurvePublicKey)
    spki = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    wanted_id = hashlib.sha256(spki).digest()[:4]
    verified = 0
    for line in signatures.rstrip("\n").split("\n"):
        dash, signer, blob = line.split(" ")
        assert dash == EM_DASH, line
        raw = base64.b64decode(blob, validate=True)
        if signer == name and raw[:4] == wanted_id:
            key.verify(raw[4:], text.encode(), ec.ECDSA(hashes.SHA256()))
            verified += 1
    assert verified, f"no signature of {name} in the note"
    origin, size, root = text.rstrip("\n").split("\n")[:3]
    assert origin == name
    assert size == str(int(size))
    return SpecCheckpoint(origin, int(size), base64.b64decode(root, validate=True))


def bundle_entries(bundle: bytes) -> list[bytes]:
    entries, at = [], 0
    while at < len(bundle):
        length = int.from_bytes(bundle[at : at + 2], "big")
        entries.append(bundle[at + 2 : at + 2 + length])
        at += 2 + length
    return entries


def bundle_of(entries: list[bytes]) -> bytes:
    return b"".join(len(entry).to_bytes(2, "big") + entry for entry in entries)
