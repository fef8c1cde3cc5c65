"""EvidenceDrop adapters: the Store itself (local) and an S3 prefix (the quick Lambda)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forkhorse import records
from forkhorse.domain.canonical import RecordCorruptedError, canonical_bytes, digest_of
from forkhorse.domain.receipts import CheckRecord
from forkhorse.ports.clock import Clock
from forkhorse.ports.store import RecordStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

QUICK_RESULTS_PREFIX = "quick-results/"


class StoreEvidenceDrop:
    """Local mode: the trusted parent already holds the Store."""

    def __init__(self, store: RecordStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def put(self, record: CheckRecord) -> str:
        return records.put_json(self._store, record.model_dump(mode="json"), self._clock.now())

    def take(self, digest: str) -> CheckRecord:
        value = records.get_json(self._store, digest)
        if value is None:
            raise LookupError("the check's evidence is missing")
        return CheckRecord.model_validate(value)


class S3EvidenceDrop:
    """AWS: content-addressed objects under `quick-results/` in the git bucket."""

    def __init__(self, s3: S3Client, bucket: str, prefix: str = QUICK_RESULTS_PREFIX) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._prefix = prefix

    def put(self, record: CheckRecord) -> str:
        data = canonical_bytes(record.model_dump(mode="json"))
        digest = digest_of(data)
        self._s3.put_object(Bucket=self._bucket, Key=self._prefix + digest, Body=data)
        return digest

    def take(self, digest: str) -> CheckRecord:
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=self._prefix + digest)["Body"]
        except self._s3.exceptions.NoSuchKey as missing:
            raise LookupError("the check's evidence is missing") from missing
        data = body.read()
        if digest_of(data) != digest:
            raise RecordCorruptedError(digest)
        return CheckRecord.model_validate_json(data)
