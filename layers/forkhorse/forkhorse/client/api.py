"""`ForkhorseClient`: every route of the API, answering typed models.

HTTP is httpx, with timeouts. A connection that cannot be made is retried for any method
(nothing was sent); a 5xx or a dropped answer is retried only for idempotent methods, so a
review or a promote is never requested twice. Refusals raise `ApiError` with the service's
sentence; the token travels only in the Authorization header and is never in a message.
Every request goes to the configured service's origin (`forkhorse.client.origin`) and no
redirect is followed: a 3xx is an error, so a `Location` elsewhere never gets the token.

The client is a witness of the server's transparency log (`forkhorse.client.witness`): before
its first request, and before each request that changes something, it checks the log's
newest checkpoint against the one it verified before (one small GET of `/log/checkpoint`,
without the token, when nothing changed) and refuses to go on (`WitnessRefused`) when the
server shows another history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from pydantic import BaseModel

from forkhorse import responses
from forkhorse.api import models as bodies
from forkhorse.client.config import ClientConfig, witness_path
from forkhorse.client.errors import ApiError, ClientError, ServiceUnavailable
from forkhorse.client.log_source import HttpLogSource
from forkhorse.client.origin import Origin, OriginError, origin_of, service_origin
from forkhorse.client.witness import LogWitness, Witnessed, WitnessState

CONNECT_SECONDS = 10.0
# A promote request may wait up to the service's promote wait (25 s) before answering.
READ_SECONDS = 60.0
CONNECT_RETRIES = 3
IDEMPOTENT_ATTEMPTS = 4
RETRY_PAUSE_SECONDS = 0.5
IDEMPOTENT = frozenset({"GET", "PUT", "DELETE", "PATCH"})


type PromoteAnswer = responses.Promoted | responses.PromotionPending


def _promotion(status: int, payload: Any) -> PromoteAnswer:
    if status == 202:
        return responses.PromotionPending.model_validate(payload)
    return responses.Promoted.model_validate(payload)


def _paged(path: str, cursor: str | None, limit: int | None) -> str:
    query = urlencode({k: v for k, v in (("cursor", cursor), ("limit", limit)) if v})
    return path + (f"?{query}" if query else "")


def _redirected(response: httpx.Response, service: Origin) -> str:
    """Why a redirect is an error: the client follows none (its token would go with it)."""
    try:
        target = origin_of(str(response.next_request.url)) if response.next_request else None
    except OriginError:
        target = None
    where = "the same origin" if target == service else "another origin" if target else "?"
    return (
        f"The service answered {response.status_code}, a redirect to {where}; the client "
        f"follows no redirect (the token goes only to {service}). Check the service URL."
    )


def _body(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_defaults=True)


class ForkhorseClient:
    def __init__(
        self,
        config: ClientConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        pause: Callable[[float], None] = time.sleep,
        witness: bool = True,
        witness_state: Path | None = None,
    ) -> None:
        """`witness_state` is the witness's file (default: `config.witness_path()`);
        `witness=False` turns the witness off (tests of the HTTP policy alone)."""
        self.config = config
        self._origin = service_origin(config.url)
        self._pause = pause
        self._http = httpx.Client(
            base_url=config.url,
            headers={"Authorization": f"Bearer {config.token}", "Accept": "application/json"},
            timeout=httpx.Timeout(READ_SECONDS, connect=CONNECT_SECONDS),
            transport=transport or httpx.HTTPTransport(retries=CONNECT_RETRIES),
            follow_redirects=False,
        )
        state = WitnessState(witness_state or witness_path())
        self._witness = LogWitness(state) if witness else None
        self._witness_due = True
        self.witnessed: Witnessed | None = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ForkhorseClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the witness ----------------------------------------------------------------------
    def witness_log(self) -> Witnessed | None:
        """Look at the server's transparency log now; None when the witness is off.
        Raises WitnessRefused when the log is not the one this client verified before."""
        if self._witness is None:
            return None
        self._witness_due = False
        self.witnessed = self._witness.observe(self.config.url, HttpLogSource(self._http, "log/"))
        return self.witnessed

    def _witness_if_due(self, method: str) -> None:
        """Before the first request, and before each that changes something."""
        if self._witness is not None and (self._witness_due or method != "GET"):
            self.witness_log()

    def witness_next_call(self) -> None:
        """Have the witness look again before the next request (the MCP server's tool calls
        share one client)."""
        self._witness_due = True

    # --- transport ------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One call; 2xx answers `(status, json)`, anything else raises."""
        self._witness_if_due(method)
        attempts = IDEMPOTENT_ATTEMPTS if method in IDEMPOTENT else 1
        for attempt in range(1, attempts + 1):
            try:
                # Every mutating request must say JSON, even one without a body.
                headers = {} if method == "GET" else {"Content-Type": "application/json"}
                request = self._http.build_request(method, path, json=body, headers=headers)
                if origin_of(str(request.url)) != self._origin:  # never, for a path
                    raise OriginError("Refusing to send the token to another origin.")
                response = self._http.send(request)
            except httpx.TransportError as exc:
                if attempt == attempts:
                    raise ServiceUnavailable(
                        f"Cannot reach {self.config.url}: {type(exc).__name__}."
                    ) from None
                self._pause(RETRY_PAUSE_SECONDS * attempt)
                continue
            if response.status_code >= 500 and attempt < attempts:
                self._pause(RETRY_PAUSE_SECONDS * attempt)
                continue
            return self._answer(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def _answer(self, response: httpx.Response) -> tuple[int, Any]:
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code >= 500:
            raise ServiceUnavailable(ApiError.from_body(response.status_code, payload).args[0])
        if response.status_code >= 400:
            raise ApiError.from_body(response.status_code, payload)
        if response.status_code >= 300:
            raise ClientError(_redirected(response, self._origin))
        return response.status_code, payload

    def _get[M: BaseModel](self, model: type[M], method: str, path: str, body: Any = None) -> M:
        _, payload = self.request(method, path, body)
        return model.model_validate(payload)

    # --- projects ---------------------------------------------------------------------------
    def list_projects(self) -> responses.ProjectList:
        """An owner's projects; an agent's, the projects it is a member of."""
        return self._get(responses.ProjectList, "GET", "/projects")

    def list_packets(
        self, project: str, cursor: str | None = None, limit: int | None = None
    ) -> responses.PacketPage:
        """One page of the project's packets with their live claims (owner and members);
        its `next` cursor continues it."""
        path = _paged(f"/projects/{project}/packets", cursor, limit)
        return self._get(responses.PacketPage, "GET", path)

    def create_project(self, name: str, require_receipt: bool = True) -> responses.ProjectBody:
        body = bodies.CreateProject(name=name, requireReceipt=require_receipt)
        return self._get(responses.ProjectBody, "POST", "/projects", _body(body))

    def set_settings(self, project: str, require_receipt: bool) -> responses.SettingsBody:
        body = bodies.Settings(requireReceipt=require_receipt)
        path = f"/projects/{project}/settings"
        return self._get(responses.SettingsBody, "PATCH", path, body.model_dump(by_alias=True))

    def set_policy(self, project: str, protect_checks: bool) -> responses.PolicyBody:
        body = bodies.Policy(protectChecks=protect_checks).model_dump(by_alias=True)
        return self._get(responses.PolicyBody, "PUT", f"/projects/{project}/policy", body)

    def state(self, project: str) -> responses.ProjectState:
        return self._get(responses.ProjectState, "GET", f"/projects/{project}/state")

    def create_agent(self, name: str) -> responses.CreatedAgent:
        body = _body(bodies.CreateAgent(name=name))
        return self._get(responses.CreatedAgent, "POST", "/agents", body)

    def revoke_agent(self, agent_id: str) -> responses.RevokedAgent:
        return self._get(responses.RevokedAgent, "DELETE", f"/agents/{agent_id}")

    def add_member(self, project: str, agent_id: str) -> responses.MemberBody:
        body = _body(bodies.AddMember(agentId=agent_id))
        return self._get(responses.MemberBody, "POST", f"/projects/{project}/members", body)

    def create_packet(self, project: str, title: str) -> responses.PacketBody:
        body = _body(bodies.CreatePacket(title=title))
        return self._get(responses.PacketBody, "POST", f"/projects/{project}/packets", body)

    # --- agents -----------------------------------------------------------------------------
    def create_fork(self, project: str, name: str) -> responses.ForkBody:
        body = _body(bodies.CreateFork(name=name))
        return self._get(responses.ForkBody, "POST", f"/projects/{project}/forks", body)

    def claim(self, project: str, packet: str) -> responses.ClaimBody:
        path = f"/projects/{project}/packets/{packet}/claim"
        return self._get(responses.ClaimBody, "POST", path)

    def release(self, project: str, packet: str) -> responses.ReleasedClaim:
        path = f"/projects/{project}/packets/{packet}/claim"
        return self._get(responses.ReleasedClaim, "DELETE", path)

    def request_review(
        self, project: str, packet: str, fork: str, commit: str, follow_pushes: bool = False
    ) -> responses.ReviewBody:
        body = bodies.RequestReview(
            packetId=packet, forkId=fork, commit=commit, followPushes=follow_pushes
        )
        path = f"/projects/{project}/reviews"
        return self._get(responses.ReviewBody, "POST", path, _body(body))

    def add_review_receipt(
        self, project: str, review: str, receipt: dict[str, Any]
    ) -> responses.StoredReviewReceipt:
        path = f"/projects/{project}/reviews/{review}/review-receipts"
        return self._get(responses.StoredReviewReceipt, "POST", path, receipt)

    def list_review_receipts(self, project: str, review: str) -> responses.ReviewReceiptList:
        path = f"/projects/{project}/reviews/{review}/review-receipts"
        return self._get(responses.ReviewReceiptList, "GET", path)

    # --- reviews (owner) --------------------------------------------------------------------
    def receipt(self, project: str, review: str) -> responses.ReceiptBody:
        path = f"/projects/{project}/reviews/{review}/receipt"
        return self._get(responses.ReceiptBody, "GET", path)

    def approve(
        self, project: str, review: str, commit: str, accept_checks_change: bool = False
    ) -> responses.ApprovalBody:
        body = bodies.ApproveBody(commit=commit, acceptChecksChange=accept_checks_change)
        path = f"/projects/{project}/reviews/{review}/approve"
        return self._get(responses.ApprovalBody, "POST", path, _body(body))

    def promote(self, project: str, review: str, commit: str) -> PromoteAnswer:
        """Done (200), or pending (202) while the before-promote run goes on; refusals raise."""
        body = _body(bodies.CommitBody(commit=commit))
        path = f"/projects/{project}/reviews/{review}/promote"
        return _promotion(*self.request("POST", path, body))

    def promotion(self, project: str, review: str) -> PromoteAnswer:
        return _promotion(*self.request("GET", f"/projects/{project}/reviews/{review}/promotion"))

    def gate(self, project: str, review: str) -> responses.GateView:
        return self._get(responses.GateView, "GET", f"/projects/{project}/reviews/{review}/gate")

    def history(self, project: str, review: str) -> responses.HistoryView:
        path = f"/projects/{project}/reviews/{review}/history"
        return self._get(responses.HistoryView, "GET", path)

    def review(self, project: str, review: str) -> responses.ReviewView:
        """One review, active or not (`/state` shows only the active ones)."""
        path = f"/projects/{project}/reviews/{review}"
        return self._get(responses.ReviewBody, "GET", path).review

    def list_reviews(
        self, project: str, cursor: str | None = None, limit: int | None = None
    ) -> responses.ReviewPage:
        """One page of every review, newest first; its `next` cursor continues it."""
        path = _paged(f"/projects/{project}/reviews", cursor, limit)
        return self._get(responses.ReviewPage, "GET", path)

    def list_ledger(
        self, project: str, cursor: str | None = None, limit: int | None = None
    ) -> responses.LedgerPage:
        """One page of the whole ledger, newest first (`/state` shows the newest entries,
        and `ledgerNext` continues them); its `next` cursor continues it."""
        path = _paged(f"/projects/{project}/ledger", cursor, limit)
        return self._get(responses.LedgerPage, "GET", path)

    def ledger_entry(self, project: str, promotion: str) -> responses.LedgerEntryBody:
        """One ledger entry, by its promotion's id (a done promotion's `links.ledger`)."""
        path = f"/projects/{project}/ledger/{promotion}"
        return self._get(responses.LedgerEntryBody, "GET", path)

    # --- attestations (`forkhorse verify` checks them offline) -----------------------------
    def review_attestation(self, project: str, review: str) -> responses.DsseEnvelope:
        path = f"/projects/{project}/reviews/{review}/attestation"
        return self._get(responses.DsseEnvelope, "GET", path)

    def promotion_attestation(self, project: str, promotion: str) -> responses.DsseEnvelope:
        path = f"/projects/{project}/promotions/{promotion}/attestation"
        return self._get(responses.DsseEnvelope, "GET", path)

    def keys(self) -> responses.KeyList:
        return self._get(responses.KeyList, "GET", "/keys")

    # --- conveniences -----------------------------------------------------------------------

    def console_link(self, project: str, review: str) -> str:
        return f"{self.config.url}/#/p/{project}/r/{review}"
