"""The agents' and owners' multi-step moves, shared by the CLI and the MCP server:
submit (fork, claim, push, request the review) and promote (following its fresh run)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forkhorse import responses
from forkhorse.client.api import ForkhorseClient
from forkhorse.client.errors import ApiError, UsageError
from forkhorse.client.follow import (
    DEFAULT_WAIT_SECONDS,
    EXIT_OF_OUTCOME,
    POLL_SECONDS,
    Progress,
    WaitTimedOut,
    review_summary,
    watch,
)
from forkhorse.client.gitpush import head_commit, push_head
from forkhorse.client.origin import require_service_origin
from forkhorse.domain.receipts import ReceiptSummary

DEFAULT_FORK_NAME = "work"
BEFORE_PROMOTE = "before-promote"


@dataclass(frozen=True)
class Submitted:
    project: str
    packet: str
    fork: responses.ForkView
    commit: str
    review: responses.ReviewView


def own_fork(client: ForkhorseClient, project: str, name: str | None) -> responses.ForkView:
    """The caller's fork (by name when given), created when it has none. An agent's
    `/state` lists only its own forks."""
    forks = client.state(project).forks
    for fork in forks:
        if name is None or fork.name == name:
            return fork
    return client.create_fork(project, name or DEFAULT_FORK_NAME).fork


def submit(
    client: ForkhorseClient,
    project: str,
    packet: str,
    checkout: Path,
    *,
    fork_name: str | None = None,
    follow_pushes: bool = False,
    force: bool = False,
) -> Submitted:
    """Push the checkout's HEAD to the caller's fork and request its review (202)."""
    commit = head_commit(checkout)
    fork = own_fork(client, project, fork_name)
    # The token goes only to the configured service: a cloneUrl on another origin is
    # refused before anything else is asked (push_head checks again).
    require_service_origin(fork.clone_url, client.config.url, "the fork's cloneUrl")
    client.claim(project, packet)  # claims, or renews the caller's live claim
    push_head(checkout, fork.clone_url, client.config, force=force)
    review = client.request_review(project, packet, fork.id, commit, follow_pushes).review
    return Submitted(project, packet, fork, commit, review)


def wait_receipt(
    client: ForkhorseClient,
    project: str,
    review: str,
    progress: Progress | None,
    timeout: float = DEFAULT_WAIT_SECONDS,
) -> ReceiptSummary:
    """Follow the review's current receipt until it settles."""
    return watch(lambda: review_summary(client, project, review), progress, timeout=timeout)


def outcome_summary(
    client: ForkhorseClient, project: str, review: str, summary: ReceiptSummary
) -> dict[str, Any]:
    """What `--json` prints once a receipt settles."""
    return {
        "project": project,
        "review": review,
        "commit": client.review(project, review).commit,
        "status": summary.status,
        "exitCode": EXIT_OF_OUTCOME.get(summary.status, 2),
        "digest": summary.digest,
        "console": client.console_link(project, review),
        "receipt": summary.model_dump(mode="json", by_alias=True),
    }


@dataclass
class PromoteOutcome:
    """The settled answer (200 with the promotion, or the service's refusal), and the
    before-promote run's summary when one was seen."""

    status: int
    body: dict[str, Any]
    run: ReceiptSummary | None


def promote(
    client: ForkhorseClient,
    project: str,
    review: str,
    commit: str | None,
    progress: Progress | None,
    timeout: float = DEFAULT_WAIT_SECONDS,
) -> PromoteOutcome:
    """Promote the review's commit, following its before-promote run while the request
    (which answers after a short wait) and then `GET .../promotion` settle."""
    before = client.review(project, review)
    target = commit or before.commit
    started_before = None if before.receipt is None else before.receipt.started_at

    def fresh(summary: ReceiptSummary) -> bool:
        return summary.trigger == BEFORE_PROMOTE and summary.started_at != started_before

    answer: dict[str, Any] = {}
    request = threading.Thread(
        target=_promote_request, args=(client, project, review, target, answer), daemon=True
    )
    request.start()
    run: ReceiptSummary | None = None
    with contextlib.suppress(_Answered):
        run = watch(
            lambda: _unless_answered(answer, review_summary(client, project, review), fresh),
            progress,
            timeout=timeout,
            fresh=fresh,
        )
    request.join(timeout)
    if run is None:  # the answer came first: the run's summary, if it was this promote's
        current = review_summary(client, project, review)
        run = current if current is not None and fresh(current) else None
    return _settle(client, project, review, answer, run, timeout)


class _Answered(Exception):
    """The promote request settled before its run's summary did."""


def _unless_answered(
    answer: dict[str, Any],
    summary: ReceiptSummary | None,
    fresh: Callable[[ReceiptSummary], bool],
) -> ReceiptSummary | None:
    """The summary to follow; stop following once the request settled and no run of its
    own is to be seen (a refusal before any run)."""
    settled = "error" in answer or answer.get("status", 202) != 202
    if settled and (summary is None or not fresh(summary)):
        raise _Answered
    return summary


def _promote_request(
    client: ForkhorseClient, project: str, review: str, commit: str, answer: dict[str, Any]
) -> None:
    try:
        promoted = client.promote(project, review, commit)
        status = 202 if isinstance(promoted, responses.PromotionPending) else 200
        answer.update(status=status, body=promoted.model_dump(mode="json", by_alias=True))
    except ApiError as refused:
        answer.update(status=refused.status, body=refused.body(), error=refused)
    except Exception as failed:  # reported by the caller's thread
        answer.update(status=0, body={}, error=failed)


def _settle(
    client: ForkhorseClient,
    project: str,
    review: str,
    answer: dict[str, Any],
    run: ReceiptSummary | None,
    timeout: float,
) -> PromoteOutcome:
    failure = answer.get("error")
    if failure is not None and not isinstance(failure, ApiError):
        raise failure
    if "status" not in answer:
        raise WaitTimedOut(timeout)
    status, body = int(answer["status"]), dict(answer["body"])
    deadline = time.monotonic() + timeout
    while status == 202:
        if time.monotonic() >= deadline:
            raise WaitTimedOut(timeout)
        time.sleep(POLL_SECONDS)
        try:
            settled = client.promotion(project, review)
            status = 202 if isinstance(settled, responses.PromotionPending) else 200
            body = settled.model_dump(mode="json", by_alias=True)
        except ApiError as refused:
            status, body = refused.status, refused.body()
    return PromoteOutcome(status, body, run)


def find_project(client: ForkhorseClient, review: str, named: str | None) -> str:
    """The project of `review`: the one named, or the one of the caller's projects (an
    owner's own, an agent's memberships) holding it."""
    if named:
        return named
    try:
        projects = client.list_projects().projects
    except ApiError as refused:
        if refused.status == 403:
            raise UsageError("Name the project: pass --project or set FORKHORSE_PROJECT.") from None
        raise
    for project in projects:
        if _holds(client, project.id, review):
            return project.id
    raise UsageError(f"No project of yours has the review {review}.")


def _holds(client: ForkhorseClient, project: str, review: str) -> bool:
    try:
        client.review(project, review)
    except ApiError as missing:
        if missing.status == 404:
            return False
        raise
    return True
