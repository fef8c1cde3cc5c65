"""GitHttpFunction: API Gateway HTTP API (v2) events for `/git/...` into the git WSGI app.

The request-size limit is `MAX_REQUEST_BYTES` (4 MiB of decoded body), from Lambda's 6 MB
payload limit and base64 encoding. Tokens and repository facts come from the same Store
and access rules as the API; pushes to forks raise `forkhorse.push` on EventBridge.
"""

from __future__ import annotations

from typing import Any

from forkhorse.githttp.apigw import MAX_REQUEST_BYTES, WsgiApp, invoke_wsgi
from forkhorse.githttp.http import RepoLookup, TokenResolver
from forkhorse.observability import api_keys, lambda_handler
from forkhorse.wiring.aws import git_http_app

__all__ = ["MAX_REQUEST_BYTES", "configure", "handler"]

_app: WsgiApp | None = None


def configure(
    resolve_token: TokenResolver | None = None, lookup: RepoLookup | None = None
) -> WsgiApp:
    """Build the app once per cold start; tests may pass their own callables."""
    global _app
    _app = git_http_app(resolve_token, lookup)
    return _app


@lambda_handler(api_keys)
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    return invoke_wsgi(_app or configure(), event)
