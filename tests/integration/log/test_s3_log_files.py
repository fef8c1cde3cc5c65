"""The log's files in S3 (moto): laid out under `log/` as the URLs are, and a checkpoint that
never goes back, even when another writer replaces it between the read and the write."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from forkhorse.adapters.s3_log import CheckpointWentBack, S3LogFiles
from forkhorse.domain.checkpoint import Checkpoint
from forkhorse.tlog.verify import CHECKPOINT_PATH

from tests.support.moto_atomic import atomic_mock_aws

BUCKET = "forkhorse-log-test"
ORIGIN = "forkhorse.test/log"


@pytest.fixture
def s3(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with atomic_mock_aws(monkeypatch):
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield client


def _note(size: int) -> bytes:
    body = Checkpoint(ORIGIN, size, bytes([size % 256]) * 32).body()
    return f"{body}\n\u2014 {ORIGIN} AAAAAQ==\n".encode()


def _stored(s3: Any, key: str) -> bytes:
    return bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_files_are_objects_under_the_log_prefix(s3: Any) -> None:
    files = S3LogFiles(s3, BUCKET)
    assert files.read("tile/0/000") is None
    files.write("tile/0/000", b"\x01" * 64)
    files.write("tile/entries/000.p/3", b"bundle")
    assert files.read("tile/0/000") == b"\x01" * 64
    assert _stored(s3, "log/tile/entries/000.p/3") == b"bundle"
    files.delete("tile/entries/000.p/3")
    assert files.read("tile/entries/000.p/3") is None
    files.delete("tile/entries/000.p/3")  # deleting what is gone is no error


@pytest.mark.parametrize("path", ["", "../secret", "tile/../../x", "tile//0", "tile/0/"])
def test_a_path_outside_the_log_is_refused(s3: Any, path: str) -> None:
    files = S3LogFiles(s3, BUCKET)
    with pytest.raises(ValueError, match="not a path under the log"):
        files.read(path)
    with pytest.raises(ValueError, match="not a path under the log"):
        files.write(path, b"x")


def test_the_checkpoint_only_moves_forward(s3: Any) -> None:
    files = S3LogFiles(s3, BUCKET)
    files.write(CHECKPOINT_PATH, _note(5))
    files.write(CHECKPOINT_PATH, _note(5))  # the same tree again (a retried publish)
    files.write(CHECKPOINT_PATH, _note(7))
    with pytest.raises(CheckpointWentBack, match="of size 7, larger than 3"):
        files.write(CHECKPOINT_PATH, _note(3))
    assert files.read(CHECKPOINT_PATH) == _note(7)
    assert _stored(s3, "log/checkpoint") == _note(7)
    with pytest.raises(ValueError, match="only a checkpoint note"):
        files.write(CHECKPOINT_PATH, b"not a checkpoint\n")
    assert files.read(CHECKPOINT_PATH) == _note(7)


def test_a_checkpoint_that_is_not_one_is_replaced(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="log/checkpoint", Body=b"\xff garbage")
    S3LogFiles(s3, BUCKET).write(CHECKPOINT_PATH, _note(1))
    assert _stored(s3, "log/checkpoint") == _note(1)


class _Racing:
    """The S3 client, but another writer puts `theirs` as the checkpoint right after each
    of our first `times` reads of it: our conditional put then meets a changed object."""

    def __init__(self, s3: Any, theirs: list[bytes]) -> None:
        self._s3 = s3
        self._theirs = theirs
        self.exceptions = s3.exceptions

    def get_object(self, **request: Any) -> Any:
        answer = self._s3.get_object(**request)
        if self._theirs:
            self._s3.put_object(Bucket=BUCKET, Key="log/checkpoint", Body=self._theirs.pop(0))
        return answer

    def put_object(self, **request: Any) -> Any:
        return self._s3.put_object(**request)


def test_a_replace_between_the_read_and_the_write_is_seen(s3: Any) -> None:
    S3LogFiles(s3, BUCKET).write(CHECKPOINT_PATH, _note(2))
    # Another writer moves it to 4 after our read: we read again, and 6 still moves forward.
    S3LogFiles(_Racing(s3, [_note(4)]), BUCKET).write(CHECKPOINT_PATH, _note(6))  # type: ignore[arg-type]
    assert _stored(s3, "log/checkpoint") == _note(6)
    # Moved to 9 after our read: writing 8 would go back, so it is refused and 9 stays.
    with pytest.raises(CheckpointWentBack):
        S3LogFiles(_Racing(s3, [_note(9)]), BUCKET).write(CHECKPOINT_PATH, _note(8))  # type: ignore[arg-type]
    assert _stored(s3, "log/checkpoint") == _note(9)


def test_the_first_checkpoint_is_put_only_where_none_is(s3: Any) -> None:
    """Absent when read, written by another before our put: ours does not replace it
    blindly, and the larger one stays."""
    racing = _Racing(s3, [])
    original = racing.get_object

    def absent_then_written(**request: Any) -> Any:
        racing.get_object = original  # type: ignore[method-assign]
        s3.put_object(Bucket=BUCKET, Key="log/checkpoint", Body=_note(7))
        raise s3.exceptions.NoSuchKey({"Error": {"Code": "NoSuchKey"}}, "GetObject")

    racing.get_object = absent_then_written  # type: ignore[method-assign]
    with pytest.raises(CheckpointWentBack):
        S3LogFiles(racing, BUCKET).write(CHECKPOINT_PATH, _note(5))  # type: ignore[arg-type]
    assert _stored(s3, "log/checkpoint") == _note(7)
