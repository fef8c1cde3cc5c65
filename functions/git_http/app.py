"""GitHttpFunction: API Gateway HTTP API (v2) events for `/git/...` into the git WSGI app.

The request-size limit is `MAX_REQUEST_BYTES` (4 MiB of decoded body), from Lambda's 6 MB
payload limit and base64 encoding. Token resolution and repository facts are fail-closed
placeholders until the API wiring supplies Store-backed ones through `configure`.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from botocore.config import Config
from forkhorse.adapters.events import EventBridgeBus
from forkhorse.adapters.git.apigw import MAX_REQUEST_BYTES, WsgiApp, invoke_wsgi
from forkhorse.adapters.git.http import GitHttpApp, RepoLookup, TokenResolver
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.domain.git_access import GitPrincipal, RepoFacts

__all__ = ["MAX_REQUEST_BYTES", "configure", "handler"]

_app: WsgiApp | None = None


def configure(
    resolve_token: TokenResolver | None = None, lookup: RepoLookup | None = None
) -> WsgiApp:
    """Build the app from the environment; the API wiring passes Store-backed callables."""
    global _app
    host = S3GitHost(
        boto3.client("s3", config=Config(signature_version="s3v4")),
        boto3.client("dynamodb"),
        bucket=os.environ["BUCKET_NAME"],
        table=os.environ["TABLE_NAME"],
    )
    events = EventBridgeBus(boto3.client("events"), os.environ.get("EVENT_BUS_NAME", "default"))
    _app = GitHttpApp(host, resolve_token or _no_principal, lookup or _no_repo, events)
    return _app


def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    return invoke_wsgi(_app or configure(), event)


def _no_principal(token: str) -> GitPrincipal | None:
    return None


def _no_repo(project: str, fork: str | None) -> RepoFacts | None:
    return None
