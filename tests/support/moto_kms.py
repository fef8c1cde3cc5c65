"""moto's KMS signing a `MessageType=DIGEST` message as AWS does.

moto 5.2.5's KMS Sign ignores `MessageType=DIGEST` and hashes the digest again, so a
signature AWSSigner asks for (a SHA-256 digest, as real KMS takes it) would not verify.
`prehashed_sign` makes moto sign a DIGEST message prehashed; RAW stays moto's own. Only
moto and cryptography are imported: `make sam-local` loads this file into its moto_server.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from moto.kms.responses import KmsResponse

Sign = Callable[[Any], Any]


def prehashed_sign(original: Sign) -> Sign:
    """KmsResponse.sign, signing a DIGEST message as the digest it is."""

    def sign(self: Any) -> str:
        if self._get_param("MessageType") != "DIGEST":
            return str(original(self))
        key = self.kms_backend.describe_key(self._get_param("KeyId"))
        digest = self._get_param("Message")
        digest = digest.encode("latin-1") if isinstance(digest, str) else digest
        assert len(digest) == 32, "an ECDSA_SHA_256 digest is 32 bytes"
        signature = key.private_key.private_key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
        algorithm = self._get_param("SigningAlgorithm")
        encoded = base64.b64encode(signature).decode()
        return json.dumps({"KeyId": key.arn, "Signature": encoded, "SigningAlgorithm": algorithm})

    return sign


def install() -> None:
    """For good, in a process of its own (sam-local's moto_server)."""
    setattr(KmsResponse, "sign", prehashed_sign(KmsResponse.sign))  # noqa: B010 - for good
