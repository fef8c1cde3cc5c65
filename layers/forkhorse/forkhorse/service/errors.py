"""Refusals: their kind (the API maps it to a status) and one clear sentence."""

from __future__ import annotations

from forkhorse.domain.model import RefusalKind
from forkhorse.responses import CHECKS_FAILED_BEFORE_PROMOTE as CHECKS_FAILED_BEFORE_PROMOTE
from forkhorse.responses import ErrorBody


class ServiceError(Exception):
    kind: RefusalKind = "invalid"

    def __init__(self, message: str, *, reasons: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reasons = reasons

    def body(self) -> ErrorBody:
        """The wire error: always `{"error": "<sentence>"}`, with `reasons` when a gate refuses."""
        return ErrorBody(error=self.message, reasons=self.reasons)


def refused_with(kind: RefusalKind, body: ErrorBody) -> ServiceError:
    """A refusal decided elsewhere (a promote job's), raised with its own kind."""
    error = ServiceError(body.error, reasons=body.reasons)
    error.kind = kind
    return error


class BadRequest(ServiceError):
    kind = "invalid"


class Unauthorized(ServiceError):
    kind = "unauthenticated"


class Forbidden(ServiceError):
    kind = "forbidden"


class NotFound(ServiceError):
    kind = "not-found"


class Conflict(ServiceError):
    kind = "conflict"


PROJECT_NOT_FOUND = "Project not found."
REVIEW_NOT_FOUND = "Review not found."
