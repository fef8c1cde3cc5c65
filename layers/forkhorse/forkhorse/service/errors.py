"""Refusals with the HTTP status they map to and one clear sentence."""

from __future__ import annotations

from forkhorse.responses import CHECKS_FAILED_BEFORE_PROMOTE as CHECKS_FAILED_BEFORE_PROMOTE
from forkhorse.responses import ErrorBody


class ServiceError(Exception):
    status = 400

    def __init__(self, message: str, *, reasons: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reasons = reasons

    def body(self) -> ErrorBody:
        """The wire error: always `{"error": "<sentence>"}`, with `reasons` when a gate refuses."""
        return ErrorBody(error=self.message, reasons=self.reasons)


def refused_with(status: int, body: ErrorBody) -> ServiceError:
    """A refusal decided elsewhere (a promote job's), raised with its own status."""
    error = ServiceError(body.error, reasons=body.reasons)
    error.status = status
    return error


class BadRequest(ServiceError):
    status = 400


class Unauthorized(ServiceError):
    status = 401


class Forbidden(ServiceError):
    status = 403


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


PROJECT_NOT_FOUND = "Project not found."
REVIEW_NOT_FOUND = "Review not found."
