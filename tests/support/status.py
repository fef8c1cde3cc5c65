"""The HTTP status a service-level outcome is answered with, by the API's own mapping, so
service tests assert what a client sees."""

from __future__ import annotations

from forkhorse.api.routes.answers import STATUS_OF, promote_status
from forkhorse.service.errors import ServiceError
from forkhorse.service.promote.request import PromoteAnswer


def http_status(outcome: ServiceError | PromoteAnswer) -> int:
    if isinstance(outcome, ServiceError):
        return STATUS_OF[outcome.kind]
    return promote_status(outcome)
