"""DSSE envelopes over statements, with securesystemslib doing the encoding and signing."""

from __future__ import annotations

import copy
import json
from typing import Any

from securesystemslib.dsse import Envelope

from forkhorse.attest.statements import PAYLOAD_TYPE, statement_bytes
from forkhorse.ports.signer import EvidenceSigner


def sign_statement(statement: dict[str, object], signer: EvidenceSigner) -> dict[str, Any]:
    """The statement's canonical bytes in a DSSE envelope, signed over its PAE."""
    envelope = Envelope(statement_bytes(statement), PAYLOAD_TYPE, {})
    signature = signer.sign(envelope.pae())
    envelope.signatures[signature.keyid] = signature
    return envelope.to_dict()


def envelope_text(envelope: dict[str, Any]) -> str:
    return json.dumps(envelope, sort_keys=True, separators=(",", ":"))


def parse_envelope(data: dict[str, Any]) -> Envelope:
    """securesystemslib's parse; it rewrites the signatures it reads, so give it a copy."""
    return Envelope.from_dict(copy.deepcopy(data))
