"""The API: a Powertools `APIGatewayHttpResolver` over the service's use cases.

`ForkhorseApi.handle` takes an API Gateway HTTP API (v2) event, from Lambda or from the
local WSGI server. The guards (same origin, bounded well-formed JSON bodies,
authentication) are the resolver's first middlewares, then body validation; each area's
routes are a `Router` (`api.routes`). Every error is `{"error": "<sentence>"}`. Requests
are routed concurrently: the resolver keeps each request's state per thread.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
    OpenAPIResponseValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import Server

from forkhorse import console
from forkhorse.api import guards, log_files
from forkhorse.api.resolver import ThreadLocalResolver
from forkhorse.api.routes.answers import JSON, STATUS_OF
from forkhorse.api.routes.attestations import AttestationRoutes
from forkhorse.api.routes.operations import SECURITY_SCHEMES, TAGS
from forkhorse.api.routes.projects import ProjectRoutes
from forkhorse.api.routes.reviews import ReviewRoutes
from forkhorse.domain.limits import API_INPUT
from forkhorse.domain.strict_json import parse_text
from forkhorse.responses import ErrorBody
from forkhorse.service.errors import ServiceError
from forkhorse.service.facade import Service

log = logging.getLogger(__name__)

TITLE = "Forkhorse"
# What `/openapi.json` and Swagger UI at `/docs` both describe: the bearer scheme (each
# operation but the public ones requires it) and the areas' tags, in this order.
DOCUMENT: dict[str, Any] = {
    "title": TITLE,
    "servers": [Server(url="/")],
    "security_schemes": SECURITY_SCHEMES,
    "tags": list(TAGS),
}


def error_response(status: int, body: ErrorBody) -> Response[str]:
    return Response(status, JSON, json.dumps(body.model_dump(mode="json")))


def _validation_sentence(error: RequestValidationError) -> str:
    """One sentence about the first problem, naming the field."""
    problems = error.errors()
    if not problems:
        return "The request is invalid."
    first = problems[0]
    location = [str(part) for part in first.get("loc", ()) if part not in ("body", 0)]
    field = ".".join(location)
    kind = first.get("type", "")
    if kind == "json_invalid":
        return "The body is not valid JSON."
    if kind == "extra_forbidden":
        return f"Unknown field: {field}."
    if kind == "missing":
        return f"Missing field: {field}." if field else "The request needs a JSON body."
    message = str(first.get("msg", "is invalid")).rstrip(".")
    return f"Invalid {field or 'body'}: {message}."


class ForkhorseApi:
    def __init__(
        self,
        service: Service,
        *,
        trust_authorizer: bool = False,
        sign_in: dict[str, Any] | None = None,
    ) -> None:
        """`sign_in` is what the console's config tells browsers (`console.config`)."""
        self.service = service
        self._sign_in = console.config() if sign_in is None else sign_in
        self._guards = guards.RequestGuards(
            guards.origin_of(service.context.settings.public_url),
            service.authenticate,
            trust_authorizer,
            API_INPUT,
        )
        # The guard has already parsed the body strictly; the resolver parses it the same
        # way. Validation is added by hand below so that it runs after the guards.
        self.resolver = ThreadLocalResolver(json_body_deserializer=parse_text)
        self._register()

    # --- entry point ----------------------------------------------------------------
    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """One request: a console file, or a routed API call."""
        static = self._console(event)
        if static is not None:
            return static
        path = str(event.get("rawPath", "/"))
        log_file = log_files.answer(self.service.log, guards.method_of(event), path)
        if log_file is not None:
            return log_file
        return self.resolver.resolve(event, context)

    def _console(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The owner console's page, files and sign-in configuration: public, GET only.
        Every API call the page makes still passes the guards."""
        if guards.method_of(event) != "GET":
            return None
        path = str(event.get("rawPath", "/"))
        if path == console.CONFIG_PATH:
            return _plain(200, self._sign_in)
        found = console.asset(path)
        if found is None:
            return None
        data, media_type = found
        return {
            "statusCode": 200,
            "headers": {"Content-Type": media_type, **console.HEADERS},
            "body": data.decode("utf-8"),
            "isBase64Encoded": False,
        }

    # --- routes -------------------------------------------------------------------------
    def _register(self) -> None:
        app = self.resolver
        app.enable_swagger(path="/docs", **DOCUMENT)  # the token is not kept past the tab
        app.use(
            [
                *self._guards.middlewares(),
                OpenAPIRequestValidationMiddleware(),  # type: ignore[no-untyped-call]
                OpenAPIResponseValidationMiddleware(),
            ]
        )
        app.exception_handler(ServiceError)(self._service_error)
        app.exception_handler(RequestValidationError)(self._invalid)
        app.not_found()(self._not_found)
        app.get("/openapi.json", include_in_schema=False)(self.openapi)
        app.include_router(ProjectRoutes(self.service.projects).router)
        app.include_router(ReviewRoutes(self.service).router)
        app.include_router(AttestationRoutes(self.service.attestations).router)

    def _service_error(self, error: ServiceError) -> Response[str]:
        return error_response(STATUS_OF[error.kind], error.body())

    def _invalid(self, error: RequestValidationError) -> Response[str]:
        return error_response(400, ErrorBody(error=_validation_sentence(error)))

    def _not_found(self, error: NotFoundError) -> Response[str]:
        """No route: refused by the guards as any request would be, else 405 with `Allow`
        when the path has routes for other methods, else 404."""
        try:
            self._guards.check(self.resolver)
        except ServiceError as refused:
            return self._service_error(refused)
        allowed = self._allowed_methods(self.resolver.current_event.path)
        if not allowed:
            return error_response(404, ErrorBody(error="No such route."))
        answer = error_response(405, ErrorBody(error=f"Method not allowed: use {allowed}."))
        answer.headers["Allow"] = allowed
        return answer

    def _allowed_methods(self, path: str) -> str:
        """The methods the routes matching `path` take, as an `Allow` header lists them."""
        routes = self.resolver._static_routes + self.resolver._dynamic_routes
        return ", ".join(sorted({route.method for route in routes if route.rule.match(path)}))

    def openapi(self) -> Response[str]:
        """The OpenAPI document, as `/openapi.json` serves it and `openapi.json` commits it."""
        schema = self.resolver.get_openapi_json_schema(openapi_version="3.1.0", **DOCUMENT)
        return Response(200, JSON, schema)


def _plain(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }
