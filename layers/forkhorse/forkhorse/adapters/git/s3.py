"""AWS GitStore: packs in S3 through a dulwich `BucketBasedObjectStore`, refs in DynamoDB.

S3 keys: `git/<project>/packs/pack-<sha>.pack` and `.idx` (the index is written last, so a
pack becomes visible only when complete); snapshot archives at `archives/<commit>.tar`.
DynamoDB (the single table): `pk = REPO#<project>#canonical` or `REPO#<project>#fork#<fork>`;
`sk = META` marks the repository, `sk = REF#<name>` holds one ref. Every ref write is a
conditional write, so a compare-and-set has exactly one winner.

Fork quotas here (`quota.py`): the ref quota holds as on disk (every push to a fork counts
its `REF#` items before its pack is read; `DulwichGitStore._fork_quota`). The byte quota
does not: no ledger is kept in DynamoDB. What bounds a fork's S3 bytes instead is each push
(4 MiB through `GitHttpFunction`) and `CollectGarbageFunction`, which drops packs nothing
reaches once older than the grace period, hourly; reachable packs stay, as on disk.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from botocore.exceptions import ClientError
from dulwich.object_store import BucketBasedObjectStore
from dulwich.objects import ObjectID, valid_hexsha
from dulwich.pack import Pack, PackData, PackIndex, load_pack_index_file
from dulwich.refs import Ref, RefsContainer, SymrefLoop

from forkhorse.adapters.git.ingest.session import SessionPackReceiver
from forkhorse.adapters.git.reach import DEFAULT_REACH_LIMIT, reachable
from forkhorse.adapters.git.store import HEAD, ZERO_SHA, DulwichGitStore
from forkhorse.domain.git_access import is_valid_repo_name
from forkhorse.ports.git import (
    ARCHIVE_URL_TTL_SECONDS,
    DEFAULT_BRANCH,
    ArchiveLink,
    PackCollection,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

_SYMREF = b"ref: "
_REF_PREFIX = "REF#"
_META = "META"
_CONDITION_FAILED = "ConditionalCheckFailedException"
_COMPLETE = frozenset({"pack", "idx"})


# An archive is reused for this long; the bucket expires archives after a day.
ARCHIVE_REUSE_SECONDS = 12 * 3600


class S3PackObjectStore(SessionPackReceiver, BucketBasedObjectStore):
    """Packs of one project under `git/<project>/packs/` in one bucket. A push arrives
    through its request's `PushSession` (bounded, connectivity-checked), which uploads the
    completed pack with `add_pack`: the pack first, its index last."""

    def __init__(self, s3: S3Client, bucket: str, prefix: str) -> None:
        super().__init__()
        self._s3 = s3
        self._bucket = bucket
        self._prefix = prefix

    def _pack_files(self) -> dict[str, dict[str, tuple[datetime, int]]]:
        """Each pack name's stored parts (`pack`, `idx`): when each was uploaded, its size."""
        files: dict[str, dict[str, tuple[datetime, int]]] = {}
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=self._prefix):
            for item in page.get("Contents", []):
                name, _, extension = item["Key"][len(self._prefix) :].rpartition(".")
                files.setdefault(name, {})[extension] = (item["LastModified"], item["Size"])
        return files

    def _iter_pack_names(self) -> Iterator[str]:
        files = self._pack_files()
        return iter(sorted(name for name, parts in files.items() if parts.keys() >= _COMPLETE))

    def unreachable_packs(self, reached: set[bytes], written_before: datetime) -> PackCollection:
        """Packs (or a crashed upload's lone part) uploaded before `written_before` holding
        no reached object, and their bytes. A newer pack is kept: its push may not have
        written its refs."""
        names, freed = [], 0
        for name, parts in sorted(self._pack_files().items()):
            if max(uploaded for uploaded, _ in parts.values()) >= written_before:
                continue
            if parts.keys() >= _COMPLETE and not reached.isdisjoint(self._load_pack_index(name)):
                continue
            names.append(name)
            freed += sum(size for _, size in parts.values())
        return PackCollection(names, freed)

    def remove_packs(self, names: list[str]) -> None:
        for name in names:
            self._remove_pack_by_name(name)

    def _get_pack(self, name: str) -> Pack:
        return Pack.from_lazy_objects(
            lambda: self._load_pack_data(name), lambda: self._load_pack_index(name)
        )

    def _load_pack_data(self, name: str) -> PackData:
        return PackData(
            name + ".pack", self.object_format, io.BytesIO(self._download(name, "pack"))
        )

    def _load_pack_index(self, name: str) -> PackIndex:
        data = io.BytesIO(self._download(name, "idx"))
        return load_pack_index_file(name + ".idx", data, self.object_format)

    def _upload_pack(self, basename: str, pack_file: BinaryIO, index_file: BinaryIO) -> None:
        self._s3.upload_fileobj(pack_file, self._bucket, f"{self._prefix}{basename}.pack")
        self._s3.upload_fileobj(index_file, self._bucket, f"{self._prefix}{basename}.idx")

    def _remove_pack_by_name(self, name: str) -> None:
        for extension in ("idx", "pack"):
            self._s3.delete_object(Bucket=self._bucket, Key=f"{self._prefix}{name}.{extension}")

    def _download(self, name: str, extension: str) -> bytes:
        body = self._s3.get_object(Bucket=self._bucket, Key=f"{self._prefix}{name}.{extension}")
        return body["Body"].read()


class DynamoRefsContainer(RefsContainer):
    """One repository's refs as items of the single table, written only with conditions."""

    def __init__(self, dynamodb: DynamoDBClient, table: str, pk: str) -> None:
        super().__init__()
        self._db = dynamodb
        self._table = table
        self._pk = pk

    def allkeys(self) -> set[Ref]:
        names: set[Ref] = set()
        paginator = self._db.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": self._pk}, ":prefix": {"S": _REF_PREFIX}},
            ConsistentRead=True,
        )
        for page in pages:
            names.update(
                Ref(item["sk"]["S"][len(_REF_PREFIX) :].encode()) for item in page["Items"]
            )
        return names

    def read_loose_ref(self, name: Ref) -> bytes | None:
        item = self._db.get_item(
            TableName=self._table, Key=self._key(name), ConsistentRead=True
        ).get("Item")
        return item["value"]["S"].encode() if item else None

    def get_packed_refs(self) -> dict[Ref, ObjectID]:
        return {}

    def set_symbolic_ref(self, name: Ref, other: Ref, *args: Any, **kwargs: Any) -> None:
        self._db.put_item(TableName=self._table, Item=self._item(name, _SYMREF + other))

    def set_if_equals(
        self, name: Ref, old_ref: ObjectID | None, new_ref: ObjectID, *args: Any, **kwargs: Any
    ) -> bool:
        return self._conditional_put(self._resolved(name), old_ref, new_ref)

    def add_if_new(self, name: Ref, ref: ObjectID, *args: Any, **kwargs: Any) -> bool:
        return self._conditional_put(self._resolved(name), ZERO_SHA, ref)

    def remove_if_equals(
        self, name: Ref, old_ref: ObjectID | None, *args: Any, **kwargs: Any
    ) -> bool:
        condition = _condition(old_ref)
        try:
            self._db.delete_item(
                TableName=self._table, Key=self._key(self._resolved(name)), **condition
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == _CONDITION_FAILED:
                return False
            raise
        return True

    def _resolved(self, name: Ref) -> Ref:
        try:
            names, _ = self.follow(name)
        except (KeyError, SymrefLoop):
            return name
        return names[-1]

    def _conditional_put(self, name: Ref, old_ref: ObjectID | None, new_ref: ObjectID) -> bool:
        try:
            self._db.put_item(
                TableName=self._table, Item=self._item(name, new_ref), **_condition(old_ref)
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == _CONDITION_FAILED:
                return False
            raise
        return True

    def _key(self, name: bytes) -> dict[str, Any]:
        return {"pk": {"S": self._pk}, "sk": {"S": _REF_PREFIX + name.decode("utf-8")}}

    def _item(self, name: bytes, value: bytes) -> dict[str, Any]:
        return {**self._key(name), "value": {"S": value.decode("utf-8")}}


def _condition(old_ref: bytes | None) -> dict[str, Any]:
    """None: unconditional (dulwich's meaning); the zero SHA: must be absent; else: equal."""
    if old_ref is None:
        return {}
    if old_ref == ZERO_SHA:
        return {"ConditionExpression": "attribute_not_exists(sk)"}
    return {
        "ConditionExpression": "#value = :old",
        "ExpressionAttributeNames": {"#value": "value"},
        "ExpressionAttributeValues": {":old": {"S": old_ref.decode("ascii")}},
    }


class S3GitHost:
    def __init__(self, s3: S3Client, dynamodb: DynamoDBClient, bucket: str, table: str) -> None:
        self._s3 = s3
        self._db = dynamodb
        self._bucket = bucket
        self._table = table

    def store(self, project: str) -> S3GitStore:
        if not is_valid_repo_name(project):
            raise ValueError("Invalid project id.")
        return S3GitStore(project, self._s3, self._db, self._bucket, self._table)

    def collect_packs(
        self,
        project_id: str,
        forks: Iterable[str],
        extra_tips: Iterable[str],
        written_before: datetime,
        *,
        dry_run: bool,
    ) -> PackCollection:
        store = self.store(project_id)
        if not store.exists():
            return PackCollection()
        return store.collect_packs(forks, extra_tips, written_before, dry_run=dry_run)


class S3GitStore(DulwichGitStore):
    def __init__(
        self, project: str, s3: S3Client, dynamodb: DynamoDBClient, bucket: str, table: str
    ) -> None:
        super().__init__(project, S3PackObjectStore(s3, bucket, f"git/{project}/packs/"))
        self._s3 = s3
        self._db = dynamodb
        self._bucket = bucket
        self._table = table

    def _open_objects(self) -> S3PackObjectStore:
        return S3PackObjectStore(self._s3, self._bucket, f"git/{self.project}/packs/")

    def pushed(self) -> None:
        """Nothing: a Lambda holds no open packs between requests; the collector repacks."""

    def collect_packs(
        self,
        forks: Iterable[str],
        extra_tips: Iterable[str],
        written_before: datetime,
        *,
        dry_run: bool,
        limit: int = DEFAULT_REACH_LIMIT,
    ) -> PackCollection:
        """Drop whole packs that nothing reaches from canonical's and the forks' refs (or
        `extra_tips`), uploaded before `written_before`; returns their names and bytes. A
        pack with any reached object is kept whole (no rewrite). Raises ReachTooLarge past
        `limit`."""
        repos = [None, *(fork for fork in forks if self.exists(fork))]
        extra = (tip.encode("ascii") for tip in extra_tips if valid_hexsha(tip))
        objects = self._open_objects()  # refs are read first: a later push's pack is newer
        reached = reachable(objects, [*self._tips(repos), *extra], limit)
        found = objects.unreachable_packs(reached, written_before)
        if not dry_run:
            objects.remove_packs(found.packs)
        return found

    def exists(self, fork: str | None = None) -> bool:
        key = {"pk": {"S": self._pk(fork)}, "sk": {"S": _META}}
        return "Item" in self._db.get_item(TableName=self._table, Key=key, ConsistentRead=True)

    def publish_archive(self, commit: str, deadline: float | None = None) -> ArchiveLink:
        snapshot = self.open_snapshot(commit)
        key = f"archives/{snapshot.commit}.tar"  # the tree and the commit's `.git`
        if not self._archive_fresh(key):
            with tempfile.TemporaryFile() as archive:
                snapshot.export_tar(archive, deadline)
                archive.seek(0)
                self._s3.upload_fileobj(archive, self._bucket, key)
        url = self._s3.generate_presigned_url(
            "get_object",
            Params={"Bucket": self._bucket, "Key": key},
            ExpiresIn=ARCHIVE_URL_TTL_SECONDS,
        )
        return ArchiveLink(snapshot.tree, url, ARCHIVE_URL_TTL_SECONDS)

    def _archive_fresh(self, key: str) -> bool:
        """Stored, and young enough that the bucket's expiry (a day) cannot remove it while
        its link is in use; an older one is written again, which makes it young."""
        try:
            head = self._s3.head_object(Bucket=self._bucket, Key=key)
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        age = datetime.now(UTC) - head["LastModified"]
        return age.total_seconds() < ARCHIVE_REUSE_SECONDS

    def _refs_container(self, fork: str | None) -> RefsContainer:
        return DynamoRefsContainer(self._db, self._table, self._pk(fork))

    def _create_repo(self, fork: str | None, initial_head: bytes | None) -> bool:
        key = {"pk": {"S": self._pk(fork)}, "sk": {"S": _META}}
        try:
            self._db.put_item(
                TableName=self._table,
                Item={**key, "kind": {"S": "git-repo"}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == _CONDITION_FAILED:
                return False
            raise
        refs = self._refs_container(fork)
        refs.set_symbolic_ref(HEAD, Ref(DEFAULT_BRANCH.encode("ascii")))
        if initial_head is not None:
            refs.add_if_new(Ref(DEFAULT_BRANCH.encode("ascii")), ObjectID(initial_head))
        return True

    def _pk(self, fork: str | None) -> str:
        repo = "canonical" if fork is None else f"fork#{fork}"
        return f"REPO#{self.project}#{repo}"


__all__ = [
    "DynamoRefsContainer",
    "S3GitHost",
    "S3GitStore",
    "S3PackObjectStore",
]
