"""How each operation reads in the OpenAPI document: a short stable `operationId`, a one-line
summary, one tag per area, and the bearer requirement on every operation but the public ones.

Generated clients name their calls after the `operationId` and send the token where the
operation requires `bearer`; Swagger UI at `/docs` shows an Authorize button for it."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, SecurityScheme

BEARER = "bearer"
SECURITY_SCHEMES: dict[str, SecurityScheme] = {
    BEARER: HTTPBearer(
        description=(
            "An owner's or an agent's API token: `Authorization: Bearer <token>` (the owner's"
            " is written to the home's `owner-token`; an agent's comes from `POST /agents`)."
        )
    )
}

PROJECTS = "projects"
AGENTS = "agents"
FORKS = "forks"
PACKETS = "packets"
REVIEWS = "reviews"
PROMOTIONS = "promotions"
EVIDENCE = "evidence"
TAGS = (PROJECTS, AGENTS, FORKS, PACKETS, REVIEWS, PROMOTIONS, EVIDENCE)


def operation(operation_id: str, summary: str, tag: str, *, public: bool = False) -> dict[str, Any]:
    """The route's keyword arguments for its `operationId`, summary, tag and security."""
    described: dict[str, Any] = {"operation_id": operation_id, "summary": summary, "tags": [tag]}
    if not public:
        described["security"] = [{BEARER: []}]
    return described
