"""GitHttpFunction: API Gateway HTTP API (v2) events for `/git/...` into the git WSGI app.

The request-size limit is `MAX_REQUEST_BYTES` (4 MiB of decoded body), from Lambda's 6 MB
payload limit and base64 encoding. Tokens and repository facts come from the same Store
and access rules as the API; pushes to forks raise `forkhorse.push` on EventBridge.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from forkhorse.adapters.events import EventBridgeBus
from forkhorse.adapters.git.apigw import MAX_REQUEST_BYTES, WsgiApp, invoke_wsgi
from forkhorse.adapters.git.http import GitHttpApp, RepoLookup, TokenResolver
from forkhorse.api.aws import build_aws_service
from forkhorse.api.local import git_repo_lookup, git_token_resolver
from forkhorse.observability import api_keys, lambda_handler
from forkhorse.wiring.aws import git_host

__all__ = ["MAX_REQUEST_BYTES", "configure", "handler"]

_app: WsgiApp | None = None


def configure(
    resolve_token: TokenResolver | None = None, lookup: RepoLookup | None = None
) -> WsgiApp:
    """Build the app once per cold start; tests may pass their own callables."""
    global _app
    if resolve_token is None or lookup is None:
        service = build_aws_service()
        resolve_token = resolve_token or git_token_resolver(service)
        lookup = lookup or git_repo_lookup(service)
    events = EventBridgeBus(boto3.client("events"), os.environ.get("EVENT_BUS_NAME", "default"))
    _app = GitHttpApp(git_host(), resolve_token, lookup, events)
    return _app


@lambda_handler(api_keys)
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    return invoke_wsgi(_app or configure(), event)
