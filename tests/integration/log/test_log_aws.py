"""The transparency log on AWS, in-process on moto: appends go to the DynamoDB ledger and ask
the publisher by an asynchronous Lambda invoke (moto's Lambda runs the real
LogPublisherFunction handler), which writes tiles to S3 and signs the checkpoint with the
KMS key; the real ApiFunction serves them without a token, and everything verifies from
those files and the key alone. The schedule publishes what a lost invoke left and its
self-check names a tile changed in the bucket; it also settles the intents a crash left."""

from __future__ import annotations

import base64
import copy
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.dynamodb.transparency import (
    KEY_PREFIX,
    DynamoDbLogLedger,
    bundle_partition,
    entry_sort_key,
)
from forkhorse.domain.log_entries import ImportSubject, facts_digest, make_entry, parse_entry
from forkhorse.domain.model import Project, ProjectPolicy, ProjectSettings
from forkhorse.domain.tiles import ENTRIES_LEVEL, tile_for
from forkhorse.service.log_events import GateLog, policy_entry, settings_entry
from forkhorse.tlog.verify import LogKey, all_entries, check_append_only, fetch_checkpoint
from forkhorse.wiring import aws as aws_wiring
from moto.awslambda.exceptions import UnknownFunctionException
from moto.awslambda_simple.models import LambdaSimpleBackend

from tests.support.attest import sign_kms_digests_like_aws
from tests.support.aws import create_table_from_template, load_function
from tests.support.aws_usage import counting_aws_calls
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.promote import ShiftClock

ROOT = Path(__file__).resolve().parents[3]
REGION = "us-east-1"
BUCKET = "forkhorse-log-aws"
ORIGIN = "forkhorse.aws/123456789012/us-east-1/forkhorse-test"
PUBLISHER = "LogPublisherFunction"
COMMIT = "c0ffee" + "0" * 34
_API_EVENT: dict[str, Any] = json.loads((ROOT / "events/api_promote.json").read_text())
_SCHEDULE = json.loads((ROOT / "events/log_self_check.json").read_text())
_PUBLISH = json.loads((ROOT / "events/log_publish.json").read_text())


@dataclass
class World:
    key_id: str
    publisher: ModuleType
    invokes: list[tuple[str, str]] = field(default_factory=list)  # (function, invocation type)
    clock: ShiftClock = field(default_factory=ShiftClock)

    def gate(self) -> GateLog:
        """An appending function's log, wired as the handlers wire theirs."""
        return aws_wiring.gate_log(aws_wiring.attestor())

    def ledger(self) -> DynamoDbLogLedger:
        return aws_wiring._log_ledger()

    def scheduled(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.publisher.handler(_SCHEDULE, FakeLambdaContext())
        return answer

    def get(self, path: str) -> tuple[int, bytes]:
        """GET through a fresh ApiFunction container, as anyone (no authorizer context)."""
        event = copy.deepcopy(_API_EVENT)
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["requestContext"]["http"]["method"] = "GET"
        event["requestContext"].pop("authorizer")
        event["headers"].pop("content-type")
        event["body"] = None
        response = load_function("api").handler(event, FakeLambdaContext())
        body = response["body"]
        data = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()
        return response["statusCode"], data

    def key(self) -> LogKey:
        status, body = self.get("/log/key")
        assert status == 200, body
        served = json.loads(body)
        return LogKey(served["origin"], served["publicKey"])


class ApiSource:
    """The log's files as the ApiFunction serves them under /log/."""

    def __init__(self, world: World) -> None:
        self.world = world

    def read(self, path: str) -> bytes | None:
        status, data = self.world.get(f"/log/{path}")
        if status == 404:
            return None
        assert status == 200, (path, status, data)
        return data


@pytest.fixture
def world(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    with atomic_mock_aws(monkeypatch, {"lambda": {"use_docker": False}}):
        sign_kms_digests_like_aws(monkeypatch)
        table = create_table_from_template(boto3.client("dynamodb", region_name=REGION))
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        kms = boto3.client("kms", region_name=REGION)
        key_id = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"][
            "KeyId"
        ]
        for name, value in {
            "TABLE_NAME": table,
            "BUCKET_NAME": BUCKET,
            "PUBLIC_URL": "https://abc123.execute-api.us-east-1.amazonaws.com",
            "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:ReceiptRun",
            # What the template gives the appenders, the API and the publisher.
            "LOG_PUBLISHER_FUNCTION": PUBLISHER,
            "LOG_ORIGIN": ORIGIN,
            "LOG_KEY_ID": key_id,
            "FORKHORSE_SIGNING_KEY": key_id,
            "POWERTOOLS_SERVICE_NAME": "forkhorse",
        }.items():
            monkeypatch.setenv(name, value)
        world = World(key_id, load_function("log_publisher"))
        monkeypatch.setattr(aws_wiring, "SystemClock", lambda: world.clock)
        monkeypatch.setattr(LambdaSimpleBackend, "invoke", _dispatch(world))
        yield world


def _dispatch(world: World) -> Any:
    """moto's Lambda: the publisher's invoke runs its real handler; any other is unknown."""

    def invoke(
        self: object, function_name: str, qualifier: object, body: Any, headers: Any, *_: Any
    ) -> bytes:
        name = function_name.rsplit(":", 1)[-1]
        world.invokes.append((name, headers.get("X-Amz-Invocation-Type", "RequestResponse")))
        if name != PUBLISHER:
            raise UnknownFunctionException(f"arn:aws:lambda:{REGION}:123456789012:function:{name}")
        return json.dumps(world.publisher.handler(json.loads(body), FakeLambdaContext())).encode()

    return invoke


def _import(n: int) -> Any:
    subject = ImportSubject(commit=f"{n:040x}")
    return make_entry(f"proj-{n}", subject, facts_digest(subject), f"import/proj-{n}")


def _appended_unasked(indexes: range) -> None:
    """Entries at `indexes` as appends leave them (the entry, its key item, the head's
    size), whose publish was never asked. Written in batches: moto copies the whole table
    for each transaction, so a few hundred real appends take half a minute (the ledger's
    own tests append across bundles for real)."""
    client = boto3.client("dynamodb", region_name=REGION)
    items: list[dict[str, Any]] = []
    for n in indexes:
        entry = _import(n)
        items.append(
            {
                "pk": {"S": bundle_partition(n)},
                "sk": {"S": entry_sort_key(n)},
                "entry": {"B": entry.to_bytes()},
                "key": {"S": entry.key},
                "writtenAt": {"S": "2026-12-02T00:00:00+00:00"},
            }
        )
        items.append(
            {"pk": {"S": KEY_PREFIX + entry.key}, "sk": {"S": "KEY"}, "index": {"N": str(n)}}
        )
    for start in range(0, len(items), 25):
        batch: list[Any] = [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]
        client.batch_write_item(RequestItems={_table(): batch})
    client.update_item(
        TableName=_table(),
        Key={"pk": {"S": "LOG"}, "sk": {"S": "HEAD"}},
        UpdateExpression="SET #size = :size",
        ExpressionAttributeNames={"#size": "size"},
        ExpressionAttributeValues={":size": {"N": str(indexes.stop)}},
    )


def test_each_append_is_published_and_verifies_from_the_served_files(world: World) -> None:
    gate = world.gate()
    assert gate.log is not None
    assert gate.imported("proj", COMMIT) == 0
    assert world.invokes == [(PUBLISHER, "Event")]  # asked asynchronously, once per append
    source, key = ApiSource(world), world.key()
    first, _ = fetch_checkpoint(source, key)
    assert (first.origin, first.size) == (ORIGIN, 1)
    now = world.clock.now()
    assert gate.append(settings_entry("proj", ProjectSettings(require_receipt=True), now)) == 1
    assert gate.append(policy_entry("proj", ProjectPolicy(protect_checks=True), now)) == 2
    assert gate.imported("proj", COMMIT) == 0  # a retried import: logged once, published again
    second, note = fetch_checkpoint(source, key)
    assert second.size == 3
    check_append_only(source, first, second)
    kinds = [parse_entry(e).kind for e in all_entries(source, second)]
    assert kinds == ["import", "settings", "policy"]
    # The bucket's checkpoint is the ledger's newest, and the key is the KMS key's.
    stored = boto3.client("s3", region_name=REGION).get_object(Bucket=BUCKET, Key="log/checkpoint")
    assert stored["Body"].read().decode() == note == world.ledger().head().checkpoint
    der = boto3.client("kms", region_name=REGION).get_public_key(KeyId=world.key_id)["PublicKey"]
    assert load_pem_public_key(key.public_pem.encode()) == load_der_public_key(der)


def test_the_schedule_publishes_what_lost_invokes_left_across_a_tile(world: World) -> None:
    gate = world.gate()
    gate.imported("proj", COMMIT)
    first, _ = fetch_checkpoint(ApiSource(world), world.key())
    ledger = world.ledger()
    _appended_unasked(range(1, 300))
    status, body = world.get("/log")
    assert (status, json.loads(body)["pending"]) == (200, 299)
    answer = world.scheduled()
    assert answer == {
        "size": 300,
        "published": 300,
        "repaired": {"appended": [], "dropped": []},
        "ok": True,
        "problems": [],
    }
    source = ApiSource(world)
    newest, _ = fetch_checkpoint(source, world.key())
    check_append_only(source, first, newest)
    assert all_entries(source, newest) == ledger.entries(0, 300)
    status, body = world.get("/log")
    served = json.loads(body)
    assert (served["size"], served["pending"], served["lastCheck"]["ok"]) == (300, 0, True)


def test_an_append_whose_publish_cannot_be_asked_still_stands(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LOG_PUBLISHER_FUNCTION", "NoSuchFunction")
    assert world.gate().imported("proj", COMMIT) == 0
    assert "could not ask NoSuchFunction to publish the log" in caplog.text
    assert world.ledger().head().size == 1
    assert world.ledger().head().checkpoint is None
    assert world.scheduled()["published"] == 1


def test_the_self_check_names_a_tile_changed_in_the_bucket(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = world.gate()
    for n in range(3):
        gate.imported(f"proj-{n}", COMMIT)
    assert world.scheduled()["ok"] is True
    assert _problems_metric(capsys.readouterr().out) == [0]
    gate.imported("proj-3", COMMIT)  # published, not yet self-checked
    bundle = tile_for(ENTRIES_LEVEL, 0, 4).path()
    s3 = boto3.client("s3", region_name=REGION)
    data = s3.get_object(Bucket=BUCKET, Key=f"log/{bundle}")["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=f"log/{bundle}", Body=data.replace(b"proj-3", b"proj-9"))
    answer = world.scheduled()
    assert answer["ok"] is False
    assert answer["problems"] == ["entry 3 in its bundle is not the entry the tree holds"]
    assert _problems_metric(capsys.readouterr().out) == [1]
    assert json.loads(world.get("/log")[1])["lastCheck"]["problems"] == answer["problems"]


def _problems_metric(output: str) -> list[float]:
    """The LogSelfCheckProblems values the handler printed as EMF, checked against the
    alarm's namespace and dimensions (template.yaml's LogSelfCheckAlarm)."""
    values = []
    for line in output.splitlines():
        if '"LogSelfCheckProblems"' not in line:
            continue
        emf = json.loads(line)
        [directive] = emf["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "Forkhorse"
        assert directive["Dimensions"] == [["service"]]
        assert emf["service"] == "forkhorse"
        values.extend(emf["LogSelfCheckProblems"])
    return values


def test_the_schedule_settles_the_intents_a_crash_left(world: World) -> None:
    """An intent whose object the store holds is appended; one whose object never came is
    dropped once older than any step runs; one still young waits."""
    store = DynamoDbStore(boto3.client("dynamodb", region_name=REGION), _table())
    settings = ProjectSettings(require_receipt=True)
    store.create_project(
        Project(id="proj", name="p", owner_id="o", created_at=world.clock.now(), settings=settings)
    )
    gate = world.gate()
    assert gate.log is not None
    written = settings_entry("proj", settings, world.clock.now())
    never = settings_entry("gone", settings, world.clock.now())
    gate.log.intend(written)  # the project was stored; the append was lost to a crash
    gate.log.intend(never)
    young = settings_entry("gone", settings, world.clock.now() + timedelta(hours=3))
    world.clock.offset = timedelta(hours=3)
    gate.log.intend(young)
    answer = world.scheduled()
    assert answer["repaired"] == {"appended": [written.key], "dropped": [never.key]}
    assert (answer["size"], answer["published"], answer["ok"]) == (1, 1, True)
    assert [i.key for i in world.ledger().intents(10)] == [young.key]
    [entry] = all_entries(ApiSource(world), fetch_checkpoint(ApiSource(world), world.key())[0])
    assert parse_entry(entry).key == written.key


def _table() -> str:
    return os.environ["TABLE_NAME"]


def test_one_append_costs_what_the_capacity_model_says(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/capacity.md's per-append figures, counted: one gate event (its intent, its
    object's write, its append) on a log past its first tile, with its publish (the
    publisher warm), billed by AWS's rules. A level-1 tile is rewritten only when a level-0
    tile fills, once in 256 appends."""
    gate = world.gate()
    gate.imported("proj", COMMIT)  # the publisher's cold start, outside the count
    _appended_unasked(range(1, 300))
    world.scheduled()
    with counting_aws_calls(monkeypatch) as usage:
        assert gate.earned(_import(300), lambda: True)
    table = boto3.client("dynamodb", region_name=REGION).scan(TableName=_table())["Items"]
    usage.bill_updates(table)
    units = f"{usage.write_units} write units, {usage.read_units} read units"
    print(f"[capacity] log append: {dict(usage.calls)}, {units}")
    calls = {name: n for name, n in usage.calls.items() if not name.startswith("dynamodb.")}
    assert calls == {
        "lambda.Invoke": 1,  # the publish request
        "s3.GetObject": 2,  # the checkpoint it replaces, the level-1 tile the root reads
        "s3.PutObject": 3,  # the entry bundle, the level-0 tile, the checkpoint
        "s3.DeleteObject": 2,  # partial tiles two checkpoints old (free)
        "kms.Sign": 1,
    }
    assert usage.calls["dynamodb.TransactWriteItems"] == 1
    assert usage.write_units == 9  # intent 1, transaction 3 items x 2, intent gone 1, head 1
    assert usage.read_units == 7  # three reads of the head, the bundle's 45 entries (4 units)


def test_a_new_signing_key_is_logged_by_the_next_publisher_container(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = world.gate()
    gate.imported("proj", COMMIT)
    source, old_key = ApiSource(world), world.key()
    before, _ = fetch_checkpoint(source, old_key)
    kms = boto3.client("kms", region_name=REGION)
    rotated = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    for name in ("LOG_KEY_ID", "FORKHORSE_SIGNING_KEY"):  # a deployment with SigningKey changed
        monkeypatch.setenv(name, rotated["KeyId"])
    world.publisher = load_function("log_publisher")  # a new container
    world.scheduled()
    new_key = world.key()
    after, _ = fetch_checkpoint(source, new_key)
    check_append_only(source, before, after)
    entries = [parse_entry(e) for e in all_entries(source, after)]
    assert [e.kind for e in entries] == ["import", "key"]
    assert entries[-1].subject["publicKey"] == new_key.public_pem
