"""The client commands' exit codes (docs/api-and-clients.md, "For agents: the CLI and the
MCP server").

A module of constants only: parsing a client command (git's credential helper runs one on
every git call) imports this, never httpx, pydantic or the service's models.
"""

from __future__ import annotations

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_INFRASTRUCTURE = 2
EXIT_USAGE = 3
# The transparency log is refused: the witness saw another key, a rollback, a split view or
# rewritten history, or `verify-log` found the log itself broken (signature, tiles, proofs).
EXIT_LOG_REFUSED = 4
EXIT_OF_OUTCOME = {
    "passed": EXIT_PASSED,
    "failed": EXIT_FAILED,
    "infrastructure-error": EXIT_INFRASTRUCTURE,
    "timed-out": EXIT_INFRASTRUCTURE,
}
# How long `submit`, `wait` and `promote` follow a receipt unless `--timeout` says otherwise.
DEFAULT_WAIT_SECONDS = 1800.0
# The extra that brings the client's dependencies (httpx and the MCP SDK).
CLIENT_EXTRA = "pip install 'forkhorse[client]'"
