"""Local mode's signing keys under `<home>/keys/`: ECDSA P-256, like the KMS key on AWS.

The directory is 0700 and each private key 0600, created at first start; nothing serves
them, and neither sandbox nor container mounts the home. `current` names the key that signs.
Rotation writes a new key, makes it current and deletes the old private key: a retired key
can no longer sign, while its public key stays (here and in the registry) for verification.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from securesystemslib.signer import CryptoSigner, SSlibKey

KEYS_DIR = "keys"
CURRENT_FILE = "current"
PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub"


class LocalKeyring:
    def __init__(self, home: Path) -> None:
        self.directory = home / KEYS_DIR

    def _ensure_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.chmod(0o700)

    def current_keyid(self) -> str | None:
        path = self.directory / CURRENT_FILE
        return path.read_text(encoding="utf-8").strip() if path.is_file() else None

    def signer(self) -> CryptoSigner:
        """The current key's signer; the first call generates the first key."""
        self._ensure_directory()
        keyid = self.current_keyid()
        if keyid is None or not (self.directory / (keyid + PRIVATE_SUFFIX)).is_file():
            return self._generate()
        private = load_pem_private_key(
            (self.directory / (keyid + PRIVATE_SUFFIX)).read_bytes(), password=None
        )
        return CryptoSigner(private, SSlibKey.from_crypto(private.public_key()))

    def rotate(self) -> CryptoSigner:
        """A new current key; the old private key is deleted, its public key stays."""
        self._ensure_directory()
        retired = self.current_keyid()
        signer = self._generate()
        if retired is not None and retired != signer.public_key.keyid:
            (self.directory / (retired + PRIVATE_SUFFIX)).unlink(missing_ok=True)
        return signer

    def public_keys(self) -> list[SSlibKey]:
        """Every key this home ever made (current and retired), by file name order."""
        if not self.directory.is_dir():
            return []
        return [
            SSlibKey.from_crypto(load_pem_public_key(path.read_bytes()))
            for path in sorted(self.directory.glob("*" + PUBLIC_SUFFIX))
        ]

    def _generate(self) -> CryptoSigner:
        signer = CryptoSigner.generate_ecdsa()
        keyid = signer.public_key.keyid
        private = signer.private_bytes  # PKCS#8 PEM, unencrypted: the file mode protects it
        _write_new(self.directory / (keyid + PRIVATE_SUFFIX), private, 0o600)
        public = signer.public_key.keyval["public"].encode("ascii")
        _write_new(self.directory / (keyid + PUBLIC_SUFFIX), public, 0o600)
        _replace(self.directory / CURRENT_FILE, keyid.encode("ascii") + b"\n")
        return signer


def _write_new(path: Path, data: bytes, mode: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def _replace(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    _write_new(partial, data, 0o600)
    partial.replace(path)
