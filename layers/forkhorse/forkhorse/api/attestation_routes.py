"""The attestation routes: a review's and a promotion's DSSE envelope, and the public keys.

Registered by `ForkhorseApi` with one call, so the routes live apart from the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from forkhorse.service.attestations import Attestations
from forkhorse.service.identity import Caller

KEYS_PATH = "/keys"
ENVELOPE = "A DSSE envelope (payloadType application/vnd.in-toto+json)."


def _response(description: str) -> dict[int, OpenAPIResponse]:
    body: OpenAPIResponse = {
        "description": description,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
    error: OpenAPIResponse = {"description": 'An error: {"error": "<sentence>"}.'}
    return {200: body, 401: error, 403: error, 404: error}


def register_attestation_routes(
    app: APIGatewayHttpResolver, attestations: Attestations, caller: Callable[[], Caller]
) -> None:
    @app.get(
        "/projects/<project_id>/reviews/<review_id>/attestation",
        description="The signed in-toto statement of the attached receipt (owner, its agent).",
        responses=_response(ENVELOPE),
    )
    def review_attestation(project_id: str, review_id: str) -> dict[str, Any]:
        return attestations.review(caller(), project_id, review_id)

    @app.get(
        "/projects/<project_id>/promotions/<promotion_id>/attestation",
        description="The signed SLSA verification summary of a done promotion.",
        responses=_response(ENVELOPE),
    )
    def promotion_attestation(project_id: str, promotion_id: str) -> dict[str, Any]:
        return attestations.promotion(caller(), project_id, promotion_id)

    @app.get(
        KEYS_PATH,
        description="The public keys that sign evidence, with their ids (public).",
        responses=_response("The keys, oldest first; `current` marks the signing one."),
    )
    def keys() -> dict[str, Any]:
        return attestations.keys()
