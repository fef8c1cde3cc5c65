"""What the client raises: the service's refusals, and problems on the caller's side."""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """A problem before or around a request: configuration, git, an unreachable service."""


class UsageError(ClientError):
    """The caller asked for something that cannot be done as asked (exit code 3)."""


class ServiceUnavailable(ClientError):
    """The service could not be reached, or kept answering 5xx (exit code 2)."""


class LogUnavailable(ServiceUnavailable):
    """The transparency log could not be read: unreachable, or an answer other than a
    file or 404 (exit code 2)."""


class WitnessRefused(ClientError):
    """The server's transparency log is not the one this client verified before: another
    key, a rollback, a split view, rewritten history or tiles that do not match. The message
    names what changed (exit code 4)."""


class ApiError(ClientError):
    """The service refused: its status, its `{"error"}` sentence and any gate `reasons`."""

    def __init__(self, status: int, error: str, reasons: list[str] | None = None) -> None:
        super().__init__(f"{status}: {error}")
        self.status = status
        self.error = error
        self.reasons = reasons

    @classmethod
    def from_body(cls, status: int, body: Any) -> ApiError:
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            reasons = body.get("reasons")
            listed = [str(r) for r in reasons] if isinstance(reasons, list) else None
            return cls(status, body["error"], listed)
        return cls(status, f"The service answered {status} without an error sentence.")

    def body(self) -> dict[str, Any]:
        found: dict[str, Any] = {"error": self.error}
        if self.reasons is not None:
            found["reasons"] = self.reasons
        return found
