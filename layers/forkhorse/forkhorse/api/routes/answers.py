"""OpenAPI answers shared by the routes: a success's description and links, the one error
body every refusal has, and the status each kind of refusal is answered with."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from forkhorse.api.links import Links
from forkhorse.domain.model import RefusalKind
from forkhorse.responses import ErrorBody
from forkhorse.service.promote.request import PromoteAnswer

JSON = "application/json"
STATUS_OF: dict[RefusalKind, int] = {
    "invalid": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not-found": 404,
    "conflict": 409,
    "too-large": 413,
    "unsupported": 415,
}
ERROR_STATUSES = tuple(STATUS_OF.values())


def promote_status(answer: PromoteAnswer) -> int:
    """202 while the promote workflow runs, 200 once done, else its refusal's status."""
    if answer.refused is not None:
        return STATUS_OF[answer.refused]
    return 202 if answer.pending else 200


def ok(
    description: str, links: Links | None = None, model: type[BaseModel] | None = None
) -> OpenAPIResponse:
    """A success; its body is the route's return type unless `model` names another."""
    response: OpenAPIResponse = {"description": description}
    if model is not None:
        response["content"] = {JSON: {"model": model}}
    if links:
        response["links"] = links
    return response


ERRORS: dict[int, OpenAPIResponse] = {
    status: ok('An error: {"error": "<sentence>"}.', model=ErrorBody) for status in ERROR_STATUSES
}


def answers(status: int, success: OpenAPIResponse) -> dict[int, OpenAPIResponse]:
    """A route's answers: its success and every refusal."""
    return {status: success, **ERRORS}
