"""The AWS signing key: an ECC_NIST_P256 KMS key, used through securesystemslib's AWSSigner.

The public key is fetched once per Lambda container, at the first signature, so functions
that never sign never call KMS. Only the roles the key policy names may sign.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from securesystemslib.signer import ECDSA_SHA2_NISTP256, AWSSigner, Key, Signature

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient


class KmsSigner:
    def __init__(self, client: KMSClient, key_id: str) -> None:
        self._client = client
        self._key_id = key_id
        self._signer: AWSSigner | None = None
        self._lock = threading.Lock()

    def _aws_signer(self) -> AWSSigner:
        with self._lock:
            if self._signer is None:
                uri, public = AWSSigner.import_(self._key_id, ECDSA_SHA2_NISTP256)
                signer = AWSSigner.from_priv_key_uri(uri, public)
                signer.client = self._client  # the composition root's client, not a new one
                self._signer = signer
            return self._signer

    @property
    def public_key(self) -> Key:
        return self._aws_signer().public_key

    def sign(self, payload: bytes) -> Signature:
        return self._aws_signer().sign(payload)
