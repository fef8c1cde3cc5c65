"""EvidenceDrop port: how a quick check's record leaves its sandbox host.

On AWS the quick-check Lambda sits in isolated subnets and may only touch the git bucket,
so it drops the record there and a trusted step moves it into the Store. Locally the drop
is the Store itself. Either way the record is content-addressed and verified when taken.
"""

from typing import Protocol

from forkhorse.domain.receipts import CheckRecord


class EvidenceDrop(Protocol):
    def put(self, record: CheckRecord) -> str:
        """Drop the record; return its digest (SHA-256 of its canonical bytes)."""
        ...

    def take(self, digest: str) -> CheckRecord:
        """The record under `digest`, verified; raises LookupError when it is missing."""
        ...
