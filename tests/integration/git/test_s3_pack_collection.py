"""Collecting S3 packs on moto: unreachable and old packs go; reachable ones (from canonical
or any fork) and fresh ones (a push that has not written its refs yet) stay; clones work."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.events import InProcessEventBus
from forkhorse.adapters.git.reach import ReachTooLarge
from forkhorse.adapters.git.s3 import S3GitHost, S3GitStore
from forkhorse.domain.git_access import GitPrincipal
from forkhorse.domain.model import Fork, Project
from forkhorse.githttp.http import GitHttpApp
from forkhorse.records import get_record, put_record
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from tests.support.aws import ROOT, load_function, load_template
from tests.support.gitserve import (
    BUCKET,
    PROJECT,
    Directory,
    commit_all,
    git,
    import_as_canonical,
    import_objects,
    new_repo,
    write_files,
)
from tests.support.lambda_context import FakeLambdaContext
from tests.support.store import T0, crash_before_manifest, record

GRACE = timedelta(hours=1)


def _pack_names(store: S3GitStore) -> set[str]:
    return set(store._open_objects()._iter_pack_names())


def _import_pack(store: S3GitStore, source: Path) -> str:
    """Store `source`'s objects as one new pack; returns the pack's name."""
    before = _pack_names(store)
    import_objects(store, source)
    (name,) = _pack_names(store) - before
    return name


def _backdate(name: str, by: timedelta = 2 * GRACE) -> None:
    """Make a pack look uploaded `by` ago (moto stamps uploads with the real time)."""
    bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_bucket(BUCKET)
    for extension in ("pack", "idx"):
        key = bucket.keys[f"git/{PROJECT}/packs/{name}.{extension}"]
        key.last_modified -= by


def _stored_bytes(name: str) -> int:
    """A pack's bytes in the bucket, as moto holds them (its .pack and its .idx)."""
    bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_bucket(BUCKET)
    return sum(bucket.keys[f"git/{PROJECT}/packs/{name}.{ext}"].size for ext in ("pack", "idx"))


def _repo(tmp_path: Path, name: str, content: str) -> tuple[Path, str]:
    repo = new_repo(tmp_path / name)
    write_files(repo, {"file.txt": content})
    return repo, commit_all(repo, name)


@pytest.fixture
def packs(s3_host: S3GitHost, tmp_path: Path) -> dict[str, Any]:
    """canonical's pack, a fork's own pack, an old pack no ref reaches and a fresh one."""
    store = s3_host.store(PROJECT)
    canonical_repo, head = _repo(tmp_path, "canonical", "canonical\n")
    import_as_canonical(store, canonical_repo, head)
    store.create_fork("fa")
    fork_repo, fork_head = _repo(tmp_path, "fork", "fork work\n")
    names = {
        "canonical": next(iter(_pack_names(store))),
        "fork": _import_pack(store, fork_repo),
        "unreachable": _import_pack(store, _repo(tmp_path, "abandoned", "lost\n")[0]),
    }
    assert store.update_fork_ref("fa", "refs/heads/work", None, fork_head)
    for name in names.values():
        _backdate(name)
    names["fresh"] = _import_pack(store, _repo(tmp_path, "in-flight", "pushing\n")[0])
    sizes = {name: _stored_bytes(name) for name in names.values()}
    return {"store": store, "names": names, "head": head, "fork_head": fork_head, "sizes": sizes}


def _cutoff() -> datetime:
    return datetime.now(UTC) - GRACE


def test_only_the_old_unreachable_pack_goes(s3_host: S3GitHost, packs: dict[str, Any]) -> None:
    names = packs["names"]

    dry = s3_host.collect_packs(PROJECT, ["fa"], [], _cutoff(), dry_run=True)
    assert dry.packs == [names["unreachable"]]
    assert _pack_names(packs["store"]) == set(names.values()), "a dry run removes nothing"

    removed = s3_host.collect_packs(PROJECT, ["fa"], [], _cutoff(), dry_run=False)

    assert removed.packs == [names["unreachable"]]
    assert removed.bytes_reclaimed == dry.bytes_reclaimed == packs["sizes"][names["unreachable"]]
    assert _pack_names(packs["store"]) == set(names.values()) - {names["unreachable"]}
    assert s3_host.collect_packs(PROJECT, ["fa"], [], _cutoff(), dry_run=False).packs == []


def test_a_review_commit_counts_as_a_tip(s3_host: S3GitHost, packs: dict[str, Any]) -> None:
    """Without the fork's ref, the fork's pack is kept only by a review naming its commit."""
    names = packs["names"]
    removed = s3_host.collect_packs(PROJECT, [], [packs["fork_head"]], _cutoff(), dry_run=True)
    assert removed.packs == [names["unreachable"]]
    without = s3_host.collect_packs(PROJECT, [], [], _cutoff(), dry_run=True)
    assert without.packs == sorted([names["fork"], names["unreachable"]])


def test_a_walk_past_its_limit_removes_nothing(packs: dict[str, Any]) -> None:
    store: S3GitStore = packs["store"]
    with pytest.raises(ReachTooLarge):
        store.collect_packs(["fa"], [], _cutoff(), dry_run=False, limit=2)
    assert _pack_names(store) == set(packs["names"].values())


def test_clones_work_after_collection(
    s3_host: S3GitHost,
    packs: dict[str, Any],
    tmp_path: Path,
    serve_app: Callable[[Any], str],
) -> None:
    assert s3_host.collect_packs(PROJECT, ["fa"], [], _cutoff(), dry_run=False).packs
    directory = Directory(
        tokens={"agent-a-token": GitPrincipal("agent-a", "agent")},
        members={"agent-a"},
        forks={"fa": "agent-a"},
    )
    url = serve_app(GitHttpApp(s3_host, directory.resolve, directory.lookup, InProcessEventBus()))
    remote = f"{url.replace('://', '://any:agent-a-token@')}/git/{PROJECT}"

    git("clone", "-q", f"{remote}/canonical.git", str(tmp_path / "c1"), cwd=tmp_path)
    git("clone", "-q", f"{remote}/forks/fa.git", str(tmp_path / "c2"), cwd=tmp_path)

    assert git("rev-parse", "HEAD", cwd=tmp_path / "c1") == packs["head"]
    assert (tmp_path / "c1" / "file.txt").read_text() == "canonical\n"
    work = git("rev-parse", "origin/work", cwd=tmp_path / "c2")
    assert work == packs["fork_head"]
    git("checkout", "-q", "origin/work", cwd=tmp_path / "c2")
    assert (tmp_path / "c2" / "file.txt").read_text() == "fork work\n"


# The IAM action each call of the collector needs (a transaction needs each item's own).
_IAM_ACTIONS = {
    "dynamodb.GetItem": "dynamodb:GetItem",
    "dynamodb.Query": "dynamodb:Query",
    "dynamodb.Scan": "dynamodb:Scan",
    "dynamodb.DeleteItem": "dynamodb:DeleteItem",
    "s3.ListObjectsV2": "s3:ListBucket",
    "s3.GetObject": "s3:GetObject",
    "s3.DeleteObject": "s3:DeleteObject",
}
_IN_TRANSACTION = {"ConditionCheck": "dynamodb:ConditionCheckItem", "Delete": "dynamodb:DeleteItem"}
_TABLE_WRITES = {"dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}


def _granted(function: str) -> set[str]:
    """The actions the template's role statements grant `function`."""
    properties = load_template()["Resources"][function]["Properties"]
    granted: set[str] = set()
    for policy in properties["Policies"]:
        for statement in policy["Statement"]:
            action = statement["Action"]
            granted.update([action] if isinstance(action, str) else action)
    return granted


@contextmanager
def _aws_calls() -> Iterator[list[tuple[str, str]]]:
    """(IAM action, the key or partition it acts on) of every AWS call made by the clients
    created inside (the handler's)."""
    needed: list[tuple[str, str]] = []

    def before_call(event_name: str, params: dict[str, Any], **kwargs: Any) -> None:
        _, service, operation = event_name.split(".")
        if operation == "TransactWriteItems":
            for item in params["TransactItems"]:
                [(kind, body)] = item.items()
                needed.append((_IN_TRANSACTION[kind], body["Key"]["pk"]["S"]))
            return
        key = params.get("Key", "")
        needed.append(
            (
                _IAM_ACTIONS[f"{service}.{operation}"],
                str(key.get("pk", {}).get("S") if isinstance(key, dict) else key),
            )
        )

    events = boto3._get_default_session().events
    events.register("before-parameter-build", before_call)
    try:
        yield needed
    finally:
        events.unregister("before-parameter-build", before_call)


def test_the_hourly_function_collects_within_its_grants_and_keeps_a_put_in_flight(
    s3_host: S3GitHost, packs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CollectGarbageFunction on its schedule's event: the old orphan chunks and the old
    unreachable pack go; a record still being written (its intent and chunks are there, its
    manifest not yet) and every reachable or fresh pack stay. Each AWS call it makes is one
    its role grants, and it deletes only records' items and packs."""
    store = DynamoDbStore(boto3.client("dynamodb"), "forkhorse")
    store.create_project(Project(id=PROJECT, name="p", owner_id="owner-1", created_at=T0))
    store.create_fork(
        Fork(id="fa", project_id=PROJECT, name="fa", owner_agent_id="agent-a", created_at=T0)
    )
    now = datetime.now(UTC)
    orphan = crash_before_manifest(store, record(generation="crashed"), now - 2 * GRACE)
    in_flight = record(generation="writing", checks=4)
    writing = crash_before_manifest(store, in_flight, now)
    assert {stale.digest for stale in store.stale_records(now + GRACE)} == {orphan, writing}
    monkeypatch.setenv("TABLE_NAME", "forkhorse")
    monkeypatch.setenv("BUCKET_NAME", BUCKET)
    event = json.loads((ROOT / "events/collect_garbage.json").read_text())

    with _aws_calls() as calls:
        answer = load_function("collect_garbage").handler(event, FakeLambdaContext())

    assert answer == {
        "records": 0,
        "orphans": 1,
        "packs": 1,
        "bytesReclaimed": packs["sizes"][packs["names"]["unreachable"]],
        "projectsSkipped": 0,
    }
    names = packs["names"]
    assert _pack_names(packs["store"]) == set(names.values()) - {names["unreachable"]}
    assert [stale.digest for stale in store.stale_records(now + GRACE)] == [writing]
    assert put_record(store, in_flight, datetime.now(UTC)) == writing, "the put completes"
    assert get_record(store, writing) == in_flight
    granted = _granted("CollectGarbageFunction")
    assert {action for action, _ in calls} <= granted
    assert {"dynamodb:DeleteItem", "s3:DeleteObject"} <= {action for action, _ in calls}
    for action, target in calls:
        if action in _TABLE_WRITES:
            assert target.startswith("RECORD#"), (action, target)
        if action == "s3:DeleteObject":
            assert re.fullmatch(rf"git/{PROJECT}/packs/[0-9a-f]{{40}}\.(pack|idx)", target)
