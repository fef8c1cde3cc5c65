"""Finding ids and generation ids, derived exactly as the Flow-Next contract pins them."""

from __future__ import annotations

import functools
import hashlib
import json

FINDING_ID_PREFIX = "finding-"
_FINDING_DOMAIN = b"flow-next-finding-v1"


@functools.lru_cache(maxsize=65536)  # carried findings recur in every generation of a lineage
def finding_id(first_seen_receipt_id: str, ordinal: int) -> str:
    """`finding-` + 32 hex of SHA-256 over `flow-next-finding-v1\\0<firstSeen>\\0<ordinal>`."""
    preimage = b"\0".join(
        (_FINDING_DOMAIN, first_seen_receipt_id.encode("utf-8"), str(ordinal).encode("ascii"))
    )
    return FINDING_ID_PREFIX + hashlib.sha256(preimage).hexdigest()[:32]


def source_receipt_id(
    *,
    review_kind: str,
    review_id: str,
    backend: str,
    round_number: int,
    head_sha: str,
    review_text: str,
) -> str:
    """The generation id Flow-Next derives from a review's inputs: SHA-256 of the compact JSON
    preimage with non-ASCII text kept as UTF-8, never `\\u` escaped (as the reference hashes it)."""
    preimage = json.dumps(
        [1, review_kind, review_id, backend, round_number, head_sha, review_text],
        ensure_ascii=False,  # the preimage is the raw UTF-8 text, as the reference hashes it
        separators=(",", ":"),
    )
    return "review-" + hashlib.sha256(preimage.encode("utf-8")).hexdigest()


def history_name(source_receipt_id_value: str) -> str:
    """File name of a preserved generation: `<sha256(sourceReceiptId)>.json`."""
    return hashlib.sha256(source_receipt_id_value.encode("utf-8")).hexdigest() + ".json"
