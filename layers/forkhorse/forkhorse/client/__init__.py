"""The typed API client behind the agents' CLI commands and MCP server. It runs on an
agent's machine: it imports no adapter, runner, wiring or serve code."""

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
