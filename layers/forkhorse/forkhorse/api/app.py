"""The API: a Powertools `APIGatewayHttpResolver` over the service's use cases.

`ForkhorseApi.handle` takes an API Gateway HTTP API (v2) event, from Lambda or from the
local WSGI server, runs the guards (same origin, bounded well-formed JSON bodies,
authentication) and routes. Every error is `{"error": "<sentence>"}`. Requests are routed
concurrently: the resolver keeps each request's state per thread.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import Server
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from forkhorse import console
from forkhorse.api import guards
from forkhorse.api import links as links_to
from forkhorse.api.attestation_routes import register_attestation_routes
from forkhorse.api.models import (
    AddMember,
    ApproveBody,
    CommitBody,
    CreateAgent,
    CreateFork,
    CreatePacket,
    CreateProject,
    Policy,
    RequestReview,
    Settings,
)
from forkhorse.api.resolver import ThreadLocalResolver
from forkhorse.domain.limits import API_INPUT
from forkhorse.domain.strict_json import parse_text
from forkhorse.service import Service, ServiceError
from forkhorse.service.identity import Caller

log = logging.getLogger(__name__)

JSON = "application/json"
TITLE = "Forkhorse"


def _ok(description: str, links: links_to.Links | None = None) -> OpenAPIResponse:
    response: OpenAPIResponse = {
        "description": description,
        "content": {JSON: {"schema": {"type": "object"}}},
    }
    if links:
        response["links"] = links
    return response


_ERRORS: dict[int, OpenAPIResponse] = dict.fromkeys(
    (400, 401, 403, 404, 409, 413, 415), _ok('An error: {"error": "<sentence>"}.')
)


def error_response(status: int, body: dict[str, Any]) -> Response[str]:
    return Response(status, JSON, json.dumps(body))


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
        self._trust_authorizer = trust_authorizer
        self._public_origin = guards.origin_of(service.context.settings.public_url)
        # The guard has already parsed the body strictly; the resolver parses it the same way.
        self.resolver = ThreadLocalResolver(
            enable_validation=True, json_body_deserializer=parse_text
        )
        self._promote = threading.local()  # the review a promote on this thread waits for
        self._register()

    # --- entry point ----------------------------------------------------------------
    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """One request; a promote's wait for its job happens after routing."""
        static = self._console(event)
        if static is not None:
            return static
        self._promote.review_id = None
        try:
            self._guard(event)
        except ServiceError as refused:
            self.resolver.context.clear()
            return _plain(refused.status, refused.body())
        response = self.resolver.resolve(event, context)
        self.resolver.context.clear()
        deferred, self._promote.review_id = self._promote.review_id, None
        if deferred is None or response.get("statusCode") != 202:
            return response
        return self._await_promote(deferred, response)

    def _await_promote(self, review_id: str, pending: dict[str, Any]) -> dict[str, Any]:
        try:
            answer = self.service.promotions.wait(review_id)
        except ServiceError as refused:
            return _plain(refused.status, refused.body())
        return pending if answer is None else _plain(answer.status, answer.body)

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

    def _guard(self, event: dict[str, Any]) -> None:
        """Origin, media type and size first; the body is parsed only for a known caller,
        so an anonymous request is refused the same way whatever its body holds."""
        guards.check_origin(event, self._public_origin)
        path = str(event.get("rawPath", "/"))
        if path in guards.PUBLIC_PATHS:
            return
        guards.check_content_type(event)
        raw = guards.body_bytes(event, API_INPUT.body_bytes)
        caller = guards.authenticate(event, self.service.authenticate, self._trust_authorizer)
        guards.check_json_body(event, raw, API_INPUT)
        self.resolver.context["caller"] = caller

    def caller(self) -> Caller:
        caller = self.resolver.context.get("caller")
        if not isinstance(caller, Caller):
            raise ServiceError("Authentication required.")
        return caller

    # --- routes -------------------------------------------------------------------------
    def _register(self) -> None:
        app = self.resolver
        app.enable_swagger(path="/docs", title=TITLE, servers=[Server(url="/")])
        app.exception_handler(ServiceError)(self._service_error)
        app.exception_handler(RequestValidationError)(self._invalid)
        app.not_found()(self._not_found)
        app.get("/openapi.json", include_in_schema=False)(self._openapi)
        self._register_projects()
        self._register_reviews()
        register_attestation_routes(app, self.service.attestations, self.caller)

    def _service_error(self, error: ServiceError) -> Response[str]:
        return error_response(error.status, error.body())

    def _invalid(self, error: RequestValidationError) -> Response[str]:
        return error_response(400, {"error": _validation_sentence(error)})

    def _not_found(self, error: NotFoundError) -> Response[str]:
        return error_response(404, {"error": "No such route."})

    def _openapi(self) -> Response[str]:
        schema = self.resolver.get_openapi_json_schema(
            title=TITLE, servers=[Server(url="/")], openapi_version="3.1.0"
        )
        return Response(200, JSON, schema)

    def _register_projects(self) -> None:
        app, service = self.resolver, self.service
        projects = service.projects

        @app.post(
            "/projects", responses={201: _ok("The project.", links_to.created_project()), **_ERRORS}
        )
        def create_project(body: CreateProject) -> tuple[dict[str, Any], int]:
            return projects.create_project(self.caller(), body.name, body.require_receipt), 201

        @app.get(
            "/projects",
            responses={200: _ok("The owner's projects.", links_to.listed_projects()), **_ERRORS},
        )
        def list_projects() -> dict[str, Any]:
            return projects.list_projects(self.caller())

        @app.patch(
            "/projects/<project_id>/settings",
            responses={200: _ok("Settings.", links_to.in_project()), **_ERRORS},
        )
        def set_settings(project_id: str, body: Settings) -> dict[str, Any]:
            return projects.set_settings(self.caller(), project_id, body.require_receipt)

        @app.put(
            "/projects/<project_id>/policy",
            description="The protected-checks policy, apart from the spec's settings (owner).",
            responses={200: _ok("Policy."), **_ERRORS},
        )
        def set_policy(project_id: str, body: Policy) -> dict[str, Any]:
            return projects.set_policy(self.caller(), project_id, body.protect_checks)

        @app.get(
            "/projects/<project_id>/state",
            responses={200: _ok("State.", links_to.project_state()), **_ERRORS},
        )
        def state(project_id: str) -> dict[str, Any]:
            return projects.state(self.caller(), project_id)

        @app.post(
            "/agents",
            responses={201: _ok("The agent and its token.", links_to.created_agent()), **_ERRORS},
        )
        def create_agent(body: CreateAgent) -> tuple[dict[str, Any], int]:
            return projects.create_agent(self.caller(), body.name), 201

        @app.delete("/agents/<agent_id>", responses={200: _ok("Revoked."), **_ERRORS})
        def revoke_agent(agent_id: str) -> dict[str, Any]:
            return projects.revoke_agent(self.caller(), agent_id)

        @app.post(
            "/projects/<project_id>/members",
            responses={201: _ok("Member.", links_to.in_project()), **_ERRORS},
        )
        def add_member(project_id: str, body: AddMember) -> tuple[dict[str, Any], int]:
            return projects.add_member(self.caller(), project_id, body.agent_id), 201

        @app.post(
            "/projects/<project_id>/forks",
            responses={201: _ok("The fork.", links_to.in_project()), **_ERRORS},
        )
        def create_fork(project_id: str, body: CreateFork) -> tuple[dict[str, Any], int]:
            return projects.create_fork(self.caller(), project_id, body.name), 201

        @app.post(
            "/projects/<project_id>/packets",
            responses={201: _ok("Packet.", links_to.created_packet()), **_ERRORS},
        )
        def create_packet(project_id: str, body: CreatePacket) -> tuple[dict[str, Any], int]:
            return projects.create_packet(self.caller(), project_id, body.title), 201

        claim_path = "/projects/<project_id>/packets/<packet_id>/claim"

        @app.post(claim_path, responses={201: _ok("The claim.", links_to.in_project()), **_ERRORS})
        def claim(project_id: str, packet_id: str) -> tuple[dict[str, Any], int]:
            return projects.claim(self.caller(), project_id, packet_id), 201

        @app.delete(claim_path, responses={200: _ok("Released."), **_ERRORS})
        def release(project_id: str, packet_id: str) -> dict[str, Any]:
            return projects.release(self.caller(), project_id, packet_id)

    def _register_reviews(self) -> None:
        app, service = self.resolver, self.service
        review_path = "/projects/<project_id>/reviews/<review_id>"

        @app.post(
            "/projects/<project_id>/reviews",
            responses={202: _ok("Review.", links_to.requested_review()), **_ERRORS},
        )
        def request_review(project_id: str, body: RequestReview) -> tuple[dict[str, Any], int]:
            review = service.reviews.request(
                self.caller(),
                project_id,
                body.packet_id,
                body.fork_id,
                body.commit,
                body.follow_pushes,
            )
            return review, 202

        @app.get(f"{review_path}/receipt", responses={200: _ok("The record."), **_ERRORS})
        def receipt(project_id: str, review_id: str) -> dict[str, Any]:
            return service.reviews.receipt(self.caller(), project_id, review_id)

        @app.post(
            f"{review_path}/approve",
            responses={200: _ok("Consent.", links_to.approved()), **_ERRORS},
        )
        def approve(project_id: str, review_id: str, body: ApproveBody) -> dict[str, Any]:
            return service.approvals.approve(
                self.caller(), project_id, review_id, body.commit, body.accept_checks_change
            )

        promoted = links_to.promoted()
        promote_responses = {
            200: _ok("Promoted.", promoted),
            202: _ok("Still running.", promoted),
            **_ERRORS,
        }

        @app.post(f"{review_path}/promote", responses=promote_responses)
        def promote(project_id: str, review_id: str, body: CommitBody) -> tuple[Any, int]:
            # Answer at once; `handle` waits for the job once routing is done.
            answer = service.promotions.promote(
                self.caller(), project_id, review_id, body.commit, wait_seconds=0
            )
            self._promote.review_id = review_id
            return answer.body, answer.status

        @app.get(f"{review_path}/promotion", responses=promote_responses)
        def promotion(project_id: str, review_id: str) -> tuple[Any, int]:
            answer = service.promotions.status(self.caller(), project_id, review_id)
            return answer.body, answer.status

        @app.get(f"{review_path}/gate", responses={200: _ok("The gate, now."), **_ERRORS})
        def gate(project_id: str, review_id: str) -> dict[str, Any]:
            return service.inspection.gate(self.caller(), project_id, review_id)

        @app.get(f"{review_path}/history", responses={200: _ok("The run's events."), **_ERRORS})
        def history(project_id: str, review_id: str) -> dict[str, Any]:
            return service.inspection.history(self.caller(), project_id, review_id)

        receipts_path = f"{review_path}/review-receipts"

        @app.post(receipts_path, responses={201: _ok("Stored."), **_ERRORS})
        def add_review_receipt(
            project_id: str, review_id: str, body: dict[str, Any]
        ) -> tuple[dict[str, Any], int]:
            stored = service.reviews.add_review_receipt(self.caller(), project_id, review_id, body)
            return stored, 201

        @app.get(receipts_path, responses={200: _ok("Review receipts."), **_ERRORS})
        def list_review_receipts(project_id: str, review_id: str) -> dict[str, Any]:
            return service.reviews.list_review_receipts(self.caller(), project_id, review_id)


def _plain(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }
