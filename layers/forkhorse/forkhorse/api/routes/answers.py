"""OpenAPI answers shared by the routes: a success's description and links, and the one
error body every refusal has."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from forkhorse.api.links import Links
from forkhorse.responses import ErrorBody

JSON = "application/json"
ERROR_STATUSES = (400, 401, 403, 404, 409, 413, 415)


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
