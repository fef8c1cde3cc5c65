"""The typed API client behind the agents' CLI commands and MCP server. It runs on an
agent's machine: it imports no adapter, runner, wiring or serve code.

Its names load on first use (PEP 562), so `forkhorse.client.config` or `.exits` alone
(what parsing a command needs) never imports httpx or the API's models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forkhorse.client.api import ForkhorseClient
    from forkhorse.client.config import ClientConfig, resolve
    from forkhorse.client.errors import ApiError, ClientError, ServiceUnavailable, UsageError

__all__ = [
    "ApiError",
    "ClientConfig",
    "ClientError",
    "ForkhorseClient",
    "ServiceUnavailable",
    "UsageError",
    "resolve",
]
_HOMES = {
    "ForkhorseClient": "forkhorse.client.api",
    "ClientConfig": "forkhorse.client.config",
    "resolve": "forkhorse.client.config",
    "ApiError": "forkhorse.client.errors",
    "ClientError": "forkhorse.client.errors",
    "ServiceUnavailable": "forkhorse.client.errors",
    "UsageError": "forkhorse.client.errors",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
