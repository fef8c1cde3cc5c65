"""The log's static files on AWS: objects under `log/` in the deployment's bucket, keyed as the
URLs are (`log/checkpoint`, `log/tile/<L>/<N>`, `log/tile/entries/<N>`).

Tiles are put as they are built (a rewrite after a crash writes the same bytes). The
checkpoint never goes back: it is replaced by a compare-and-set on the object's ETag, and
only by a checkpoint of a tree at least as large as the one it replaces. The publisher runs
one at a time, so the compare-and-set only ever meets a stale writer, or a ledger restored
behind what was published, which it refuses loudly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from forkhorse.domain.checkpoint import CheckpointRefused, stated_checkpoint
from forkhorse.tlog.verify import CHECKPOINT_PATH

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

LOG_PREFIX = "log/"
# Replacing the checkpoint while another writer replaces it: this many tries, then an error.
CHECKPOINT_ATTEMPTS = 5
_CONDITION_FAILED = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})


class CheckpointWentBack(RuntimeError):
    """The bucket holds a checkpoint of a larger tree than the one being written."""


def _tree_size(note: bytes) -> int | None:
    """The tree size a checkpoint note states; None for bytes that are not one."""
    try:
        return stated_checkpoint(note.decode()).size
    except (UnicodeDecodeError, CheckpointRefused):
        return None


class S3LogFiles:
    def __init__(self, s3: S3Client, bucket: str, prefix: str = LOG_PREFIX) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._prefix = prefix

    def _key(self, path: str) -> str:
        parts = path.split("/")
        if not path or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"not a path under the log: {path[:120]!r}")
        return self._prefix + path

    def _get(self, path: str) -> tuple[bytes, str] | None:
        try:
            answer = self._s3.get_object(Bucket=self._bucket, Key=self._key(path))
        except self._s3.exceptions.NoSuchKey:
            return None
        return answer["Body"].read(), answer["ETag"]

    def read(self, path: str) -> bytes | None:
        found = self._get(path)
        return None if found is None else found[0]

    def write(self, path: str, data: bytes) -> None:
        if path == CHECKPOINT_PATH:
            self._advance_checkpoint(data)
            return
        self._s3.put_object(Bucket=self._bucket, Key=self._key(path), Body=data)

    def delete(self, path: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=self._key(path))

    def _advance_checkpoint(self, note: bytes) -> None:
        size = _tree_size(note)
        if size is None:
            raise ValueError("only a checkpoint note is written as the checkpoint")
        for _ in range(CHECKPOINT_ATTEMPTS):
            current = self._get(CHECKPOINT_PATH)
            if current is not None:
                held = _tree_size(current[0])  # None: not a checkpoint, replaced
                if held is not None and held > size:
                    raise CheckpointWentBack(
                        f"the bucket's checkpoint is of size {held}, larger than {size}"
                    )
            if self._put_over(note, None if current is None else current[1]):
                return
        raise RuntimeError(f"the checkpoint changed under {CHECKPOINT_ATTEMPTS} writes in a row")

    def _put_over(self, note: bytes, etag: str | None) -> bool:
        """Put the checkpoint if the object is still the one read (absent: still absent)."""
        request: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": self._key(CHECKPOINT_PATH),
            "Body": note,
            "ContentType": "text/plain; charset=utf-8",
        }
        if etag is None:
            request["IfNoneMatch"] = "*"
        else:
            request["IfMatch"] = etag
        try:
            self._s3.put_object(**request)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _CONDITION_FAILED:
                return False
            raise
        return True
