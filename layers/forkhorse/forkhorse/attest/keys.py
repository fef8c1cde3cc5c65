"""Public keys as verifiers hold them: a PEM file, one key's JSON, or `GET /keys`' answer."""

from __future__ import annotations

import copy
import json
from typing import Any

from cryptography.hazmat.primitives.serialization import load_pem_public_key
from securesystemslib.signer import Key, SSlibKey

PEM_PREFIX = b"-----BEGIN"


class UnreadableKey(ValueError):
    """Not a public key this verifier understands."""


def public_key_json(key: Key) -> str:
    return json.dumps({"keyid": key.keyid, **key.to_dict()}, sort_keys=True)


def key_from_json(value: dict[str, Any]) -> Key:
    fields = copy.deepcopy(value)
    keyid = fields.pop("keyid", None)
    for annotation in ("since", "current"):  # what `GET /keys` adds about each key
        fields.pop(annotation, None)
    if not isinstance(keyid, str):
        raise UnreadableKey("A key's JSON must carry its keyid.")
    try:
        return Key.from_dict(keyid, fields)
    except (KeyError, TypeError, ValueError) as error:
        raise UnreadableKey(f"Unsupported public key: {error}") from None


def pem_key(data: bytes) -> SSlibKey:
    try:
        return SSlibKey.from_crypto(load_pem_public_key(data))
    except (ValueError, TypeError) as error:
        raise UnreadableKey(f"Not a PEM public key: {error}") from None


def load_keys(data: bytes) -> list[Key]:
    """Every key in a PEM public key, a key's JSON, a list of them or `{"keys": [...]}`."""
    if data.lstrip().startswith(PEM_PREFIX):
        return [pem_key(data)]
    try:
        value = json.loads(data)
    except ValueError:
        raise UnreadableKey("The key file is neither PEM nor JSON.") from None
    if isinstance(value, dict) and isinstance(value.get("keys"), list):
        value = value["keys"]
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(item, dict) for item in items):
        raise UnreadableKey("The key file holds no public key.")
    return [key_from_json(item) for item in items]
