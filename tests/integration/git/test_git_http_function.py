"""GitHttpFunction on moto: API Gateway v2 events in, S3/DynamoDB repos, EventBridge events out."""

from __future__ import annotations

import base64
import importlib.util
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from forkhorse.adapters.events import EventBridgeBus, EventPublishFailed
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.domain.git_access import GitPrincipal
from forkhorse.githttp.apigw import MAX_REQUEST_BYTES
from forkhorse.ports.events import PUSH_EVENT

from tests.support.aws import create_table_from_template
from tests.support.gitserve import BUCKET, Directory, commit_all, git, new_repo
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_atomic import atomic_mock_aws

ROOT = Path(__file__).resolve().parents[3]
INFO_REFS_EVENT = json.loads((ROOT / "events" / "git_http_info_refs.json").read_text())
PUSH_SAMPLE = json.loads((ROOT / "events" / "push.json").read_text())


def load_function() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "git_http_app", ROOT / "functions/git_http/app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def aws(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    with atomic_mock_aws(monkeypatch):
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        table = create_table_from_template(dynamodb)
        events = boto3.client("events", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="pushes")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        events.put_rule(
            Name="pushes",
            EventPattern=json.dumps({"source": ["forkhorse"], "detail-type": [PUSH_EVENT]}),
        )
        events.put_targets(Rule="pushes", Targets=[{"Id": "queue", "Arn": queue_arn}])
        monkeypatch.setenv("BUCKET_NAME", BUCKET)
        monkeypatch.setenv("TABLE_NAME", table)
        yield {"s3": s3, "dynamodb": dynamodb, "table": table, "sqs": sqs, "queue": queue}


@pytest.fixture
def function(aws: dict[str, Any]) -> tuple[ModuleType, S3GitHost]:
    directory = Directory(
        tokens={
            "owner-token": GitPrincipal("owner-1", "owner"),
            "agent-a-token": GitPrincipal("agent-a", "agent"),
        },
        members={"agent-a"},
        forks={"fa": "agent-a"},
    )
    module = load_function()
    module.configure(directory.resolve, lambda project, fork: directory.lookup("proj", fork))
    host = S3GitHost(aws["s3"], aws["dynamodb"], BUCKET, aws["table"])
    for project in ("demo", "proj"):
        host.store(project).create_canonical()
    return module, host


def received_events(aws: dict[str, Any]) -> list[dict[str, Any]]:
    messages = aws["sqs"].receive_message(QueueUrl=aws["queue"], MaxNumberOfMessages=10)
    return [json.loads(message["Body"]) for message in messages.get("Messages", [])]


def test_the_sample_info_refs_event_advertises_refs(function: tuple[ModuleType, S3GitHost]) -> None:
    module, _ = function
    response = module.handler(INFO_REFS_EVENT, FakeLambdaContext())
    assert response["statusCode"] == 200
    assert response["headers"]["Content-Type"] == "application/x-git-upload-pack-advertisement"
    body = base64.b64decode(response["body"])
    assert body.startswith(b"000eversion 2\n")  # the sample is git 2.39's: Git-Protocol v2
    headers = {k: v for k, v in INFO_REFS_EVENT["headers"].items() if k != "git-protocol"}
    response = module.handler({**INFO_REFS_EVENT, "headers": headers}, FakeLambdaContext())
    assert response["statusCode"] == 200
    body = base64.b64decode(response["body"])
    assert body.startswith(b"001e# service=git-upload-pack\n")  # version 0 without it


def test_missing_credentials_get_a_401(function: tuple[ModuleType, S3GitHost]) -> None:
    module, _ = function
    event = {**INFO_REFS_EVENT, "headers": {"host": "example"}}
    response = module.handler(event, FakeLambdaContext())
    assert response["statusCode"] == 401
    assert "Basic" in response["headers"]["WWW-Authenticate"]


def test_request_size_limit_exactly_and_one_past(function: tuple[ModuleType, S3GitHost]) -> None:
    module, _ = function
    assert MAX_REQUEST_BYTES == module.MAX_REQUEST_BYTES == 4 * 1024 * 1024

    def post(size: int) -> dict[str, Any]:
        event = {
            **INFO_REFS_EVENT,
            "rawPath": "/git/demo/unknown",
            "rawQueryString": "",
            "requestContext": {"http": {"method": "POST"}},
            "body": base64.b64encode(b"0" * size).decode(),
            "isBase64Encoded": True,
        }
        return dict(module.handler(event, FakeLambdaContext()))

    assert post(MAX_REQUEST_BYTES)["statusCode"] == 404  # reached the app
    refused = post(MAX_REQUEST_BYTES + 1)
    assert refused["statusCode"] == 413
    assert str(MAX_REQUEST_BYTES) in refused["body"]
    # A git service request gets git's own error, which git prints (issue 29).
    for service, prefix in (("git-receive-pack", b"\x03"), ("git-upload-pack", b"ERR ")):
        event = {
            **INFO_REFS_EVENT,
            "rawPath": f"/git/demo/canonical.git/{service}",
            "rawQueryString": "",
            "requestContext": {"http": {"method": "POST"}},
            "body": base64.b64encode(b"0" * (MAX_REQUEST_BYTES + 1)).decode(),
            "isBase64Encoded": True,
        }
        answer = dict(module.handler(event, FakeLambdaContext()))
        assert answer["statusCode"] == 200, answer
        body = base64.b64decode(answer["body"])
        assert body[4:].startswith(prefix + b"The request is larger than"), body


def test_real_git_through_the_lambda_handler_on_s3(
    function: tuple[ModuleType, S3GitHost],
    aws: dict[str, Any],
    serve_app: Callable[[Any], str],
    tmp_path: Path,
) -> None:
    module, host = function
    url = serve_app(as_api_gateway(module.handler))
    source = new_repo(tmp_path / "owner")
    (source / "README.md").write_text("on s3\n")
    head = commit_all(source)
    remote = f"{url.replace('://', '://x:owner-token@')}/git/proj/canonical.git"
    git("push", "-q", remote, "main", cwd=source)
    store = host.store("proj")
    assert store.head() == head
    store.create_fork("fa")
    work = tmp_path / "agent"
    fork_remote = f"{url.replace('://', '://x:agent-a-token@')}/git/proj/forks/fa.git"
    git("clone", "-q", fork_remote, str(work), cwd=tmp_path)
    (work / "more.txt").write_text("more\n")
    new = commit_all(work)
    git("push", "-q", "origin", "main", cwd=work)
    assert store.head("fa") == new
    (event,) = received_events(aws)
    assert event["source"] == "forkhorse"
    assert event["detail-type"] == PUSH_EVENT
    assert set(event["detail"]) == set(PUSH_SAMPLE["detail"])
    assert (event["detail"]["old"], event["detail"]["new"]) == (head, new)
    assert event["detail"]["pusher"] == "agent-a"


def test_event_bridge_bus_publishes_the_sample_shape(aws: dict[str, Any]) -> None:
    bus = EventBridgeBus(boto3.client("events", region_name="us-east-1"))
    bus.publish(PUSH_EVENT, PUSH_SAMPLE["detail"])
    (event,) = received_events(aws)
    assert event["detail"] == PUSH_SAMPLE["detail"]
    assert event["detail-type"] == PUSH_SAMPLE["detail-type"]
    assert event["source"] == PUSH_SAMPLE["source"]


def test_event_bridge_rejections_raise() -> None:
    class Rejecting:
        def put_events(self, **_: Any) -> dict[str, Any]:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure"}]}

    with pytest.raises(EventPublishFailed):
        EventBridgeBus(Rejecting()).publish(PUSH_EVENT, {})  # type: ignore[arg-type]


def as_api_gateway(handler: Callable[[dict[str, Any], object], dict[str, Any]]) -> Any:
    """A WSGI front that turns each request into an HTTP API v2 event, as API Gateway does."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {
            key[5:].replace("_", "-").lower(): value
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        event = {
            "version": "2.0",
            "rawPath": environ["PATH_INFO"],
            "rawQueryString": environ.get("QUERY_STRING", ""),
            "headers": headers,
            "requestContext": {"http": {"method": environ["REQUEST_METHOD"]}},
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }
        response = handler(event, FakeLambdaContext())
        payload = response["body"]
        data = base64.b64decode(payload) if response["isBase64Encoded"] else payload.encode()
        start_response(f"{response['statusCode']} X", list(response["headers"].items()))
        return [data]

    return app
