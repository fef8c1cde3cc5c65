"""QuickCheckFunction: runs ONE quick check of one exact commit in the Lambda quick sandbox.

The function sits in isolated subnets with no NAT; only an S3 gateway endpoint reaches the git
bucket, and its role can read that bucket and nothing else. The parent (this process) makes
itself non-dumpable at cold start; each check runs in a fresh child with an empty environment.

Event: `{"project": str, "commit": "<40 hex>", "check": {"name", "tier": "quick", "module"}}`.
Result: `{"record": <CheckRecord JSON, camelCase>}`. Anything wrong with the event or the
snapshot becomes an `infrastructure-error` record with a static message, never an exception
text.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import boto3
from botocore.config import Config
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.adapters.sandbox.lambda_ import LambdaSandbox
from forkhorse.domain.checks import InvalidChecksConfig, QuickCheckDef, parse_checks
from forkhorse.domain.receipts import CheckRecord
from forkhorse.ports.git import GitStore

_SHA = re.compile(r"[0-9a-f]{40}")
MESSAGE_BAD_EVENT = "The quick-check request is invalid."
MESSAGE_NO_SNAPSHOT = "The snapshot could not be opened."

_sandbox = LambdaSandbox()  # cold start: PR_SET_DUMPABLE 0 before any check runs


def _store(project: str) -> GitStore:
    host = S3GitHost(
        boto3.client("s3", config=Config(signature_version="s3v4")),
        boto3.client("dynamodb"),  # never called: snapshots are read by SHA from S3 only
        bucket=os.environ["BUCKET_NAME"],
        table=os.environ["TABLE_NAME"],
    )
    return host.store(project)


def _definition(raw: object) -> QuickCheckDef | None:
    try:
        (parsed,) = parse_checks(json.dumps([raw]))
    except (InvalidChecksConfig, TypeError, ValueError):
        return None
    return parsed if isinstance(parsed, QuickCheckDef) else None


def _infrastructure_error(
    raw: object, definition: QuickCheckDef | None, message: str
) -> dict[str, Any]:
    name = (
        definition.name if definition else str(raw.get("name", "")) if isinstance(raw, dict) else ""
    )
    record = CheckRecord(
        name=name[:64],
        tier="quick",
        definition=definition.definition() if definition else {},
        runtime="dynamic-worker",
        platform=_sandbox.platform,
        image_digest="",
        outcome="infrastructure-error",
        message=message,
        duration_ms=None,
    )
    return {"record": record.model_dump(mode="json", by_alias=True)}


def handler(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    raw = event.get("check")
    definition = _definition(raw)
    project, commit = event.get("project"), event.get("commit")
    if definition is None or not isinstance(project, str) or not isinstance(commit, str):
        return _infrastructure_error(raw, definition, MESSAGE_BAD_EVENT)
    if not _SHA.fullmatch(commit):
        return _infrastructure_error(raw, definition, MESSAGE_BAD_EVENT)
    try:
        snapshot = _store(project).open_snapshot(commit)
    except Exception:  # a missing object, an unsafe tree or S3 trouble: fail closed
        return _infrastructure_error(raw, definition, MESSAGE_NO_SNAPSHOT)
    record = _sandbox.run_check(snapshot, definition)
    return {"record": record.model_dump(mode="json", by_alias=True)}
