"""The deployment key that signs evidence: a local key file or a KMS key.

securesystemslib's `Signer` (CryptoSigner, AWSSigner) has this shape already, so its
signers are adapters as they stand. Only the trusted finalize and promote-write steps get one.
"""

from __future__ import annotations

from typing import Protocol

from securesystemslib.signer import Key, Signature


class EvidenceSigner(Protocol):
    @property
    def public_key(self) -> Key: ...

    def sign(self, payload: bytes) -> Signature:
        """Sign `payload` (a DSSE pre-authentication encoding) with the current key."""
        ...
