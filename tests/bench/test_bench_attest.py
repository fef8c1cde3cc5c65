"""What signing adds to a receipt's attach: locally (ECDSA P-256 key file, SQLite) and on
AWS (moto's KMS through AWSSigner, DynamoDB), against the attach it rides on."""

from __future__ import annotations

import time
from pathlib import Path

import boto3
import pytest
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.dynamodb.attestations import DynamoDbAttestations
from forkhorse.adapters.signing.kms import KmsSigner
from forkhorse.adapters.signing.local_key import LocalKeyring
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.adapters.sqlite.attestations import SqliteAttestations
from forkhorse.attest.attestor import Attestor
from forkhorse.domain.receipts import ReceiptRecord
from forkhorse.ports.store import Store
from forkhorse.records import put_record

from tests.support.attest import sign_kms_digests_like_aws
from tests.support.aws import create_table_from_template
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.store import T0, record

pytestmark = pytest.mark.bench
RUNS = 20


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def _measure(store: Store, attestor: Attestor, label: str) -> tuple[float, float]:
    """Median time to publish a record (chunks and manifest), and to sign it."""
    publish: list[float] = []
    sign: list[float] = []
    for index in range(RUNS):
        rec: ReceiptRecord = record(generation=f"g{index}", checks=4)
        started = time.perf_counter()
        digest = put_record(store, rec, T0)
        published = time.perf_counter()
        attestor.attest_receipt(rec, digest, T0)
        signed = time.perf_counter()
        publish.append(published - started)
        sign.append(signed - published)
        assert attestor.receipt_envelope(digest) is not None
    put, add = _median(publish), _median(sign)
    print(f"\n[bench] {label}: publish {put * 1000:.2f} ms, signing adds {add * 1000:.2f} ms")
    return put, add


def test_signing_locally(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    attestor = Attestor(SqliteAttestations(store.path), LocalKeyring(tmp_path).signer())
    try:
        put, add = _measure(store, attestor, "local key, SQLite")
    finally:
        attestor.close()
        store.close()
    assert add < 50 * max(put, 0.001)


def test_signing_with_kms_on_moto(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    sign_kms_digests_like_aws(monkeypatch)
    with atomic_mock_aws(monkeypatch):
        dynamodb = boto3.client("dynamodb")
        table = create_table_from_template(dynamodb)
        kms = boto3.client("kms")
        key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
        signer = KmsSigner(kms, key["KeyId"])
        attestor = Attestor(DynamoDbAttestations(dynamodb, table), signer)
        attestor.install_key(T0)  # the public key fetch is once per container, not per sign
        put, add = _measure(DynamoDbStore(dynamodb, table), attestor, "moto KMS, DynamoDB")
    assert add < 50 * max(put, 0.001)
