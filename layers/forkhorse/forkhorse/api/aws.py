"""AWS wiring for the API, authorizer and push handlers: DynamoDB, S3 git, Step Functions.

Configuration comes from the environment: TABLE_NAME, BUCKET_NAME, STATE_MACHINE_ARN,
PUBLIC_URL and optionally PROMOTE_WAIT_SECONDS.
"""

from __future__ import annotations

import os
from typing import Any

import boto3

from forkhorse.adapters.dynamodb_store import DynamoDbStore
from forkhorse.adapters.step_functions import StepFunctionsOrchestrator
from forkhorse.ports.clock import SystemClock
from forkhorse.ports.store import Store
from forkhorse.service import Service, ServiceSettings
from forkhorse.service.identity import token_hash
from forkhorse.wiring.aws import git_host


def aws_store() -> Store:
    return DynamoDbStore(boto3.client("dynamodb"), os.environ["TABLE_NAME"])


def build_aws_service() -> Service:
    git = git_host()
    orchestrator = StepFunctionsOrchestrator(
        boto3.client("stepfunctions"), os.environ["STATE_MACHINE_ARN"]
    )
    settings = ServiceSettings(
        public_url=os.environ["PUBLIC_URL"].rstrip("/"),
        promote_wait_seconds=float(os.environ.get("PROMOTE_WAIT_SECONDS", "20")),
    )
    return Service(aws_store(), git, orchestrator, SystemClock(), settings)


def authorize(store: Store, event: dict[str, Any]) -> dict[str, Any]:
    """An HTTP API Lambda authorizer (payload 2.0, simple responses) over token hashes."""
    header = ""
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == "authorization":
            header = str(value)
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return {"isAuthorized": False}
    principal = store.find_principal_by_token_hash(token_hash(token.strip()))
    if principal is None or principal.revoked:
        return {"isAuthorized": False}
    return {"isAuthorized": True, "context": {"principalId": principal.id, "kind": principal.kind}}
