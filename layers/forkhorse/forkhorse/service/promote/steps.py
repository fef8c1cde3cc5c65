"""The steps of one promote workflow (PromoteRun): acquire, start-run, verify, write,
release, and the Catch target settle (renew is the lease's heartbeat).

Each step takes and returns its contract (`service/promote/contracts.py`), whose wire
form is exactly what the PromoteRun state machine passes between its states, so the same
functions run behind Step Functions (one Lambda each) and in the local supervisor
(`runner/local/promote.py`), which journals each step's output. A step's output is its input
plus what it adds, so any later step has what it needs.

Refusals raise `PromoteRefused`, whose message is the refusal's JSON (kind, error,
reasons): the Catch hands it to `promote_settle` as `Cause`, which stores it as the
promotion's answer. A busy lease raises `LeaseBusy`, which the workflow retries with backoff.
`ERRORS` names both, for the state machine's `Retry` and `Catch`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from forkhorse import observability
from forkhorse.domain.checks import CHECKS_PATH, CheckDef, FullCheckDef, parse_checks
from forkhorse.domain.gate import validate_required
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.domain.limits import QUICK_SANDBOX, RECEIPT_RUN_TIMEOUT_SECONDS
from forkhorse.domain.model import Promotion, Refusal, Review
from forkhorse.domain.receipts import format_timestamp
from forkhorse.domain.run import RunRef
from forkhorse.domain.snapshot import SnapshotBudget, SnapshotError
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service.approvals import gather_evidence
from forkhorse.service.context import Context
from forkhorse.service.errors import (
    CHECKS_FAILED_BEFORE_PROMOTE,
    Conflict,
    NotFound,
    ServiceError,
)
from forkhorse.service.promote import rules
from forkhorse.service.promote.attest import attest_promotion
from forkhorse.service.promote.contracts import PromoteStart, PromoteState, RunReserved
from forkhorse.service.reviews import abandon_run, reserve_run

log = logging.getLogger(__name__)

# The steps' dependencies are the service's: store, git, clock and settings.
PromoteDeps = Context

LEASE_BUSY_ERROR = "LeaseBusy"
REFUSED_ERROR = "PromoteRefused"
# The error names the state machine matches: Retry on LEASE_BUSY_ERROR, Catch on all.
ERRORS = (LEASE_BUSY_ERROR, REFUSED_ERROR)
# Past the checks' own time limits: container start, snapshot reads, verify and write.
LEASE_MARGIN_SECONDS = 600
OPEN_WRITES = ("writing", "uncertain")  # open promotions whose write may have landed


class LeaseBusy(Exception):
    """Another workflow holds the project's lease; retry later."""


class PromoteRefused(Exception):
    """The promote is refused; the message is the refusal's JSON."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.model_dump_json(exclude_none=True))
        self.refusal = refusal

    @classmethod
    def of(cls, error: ServiceError) -> PromoteRefused:
        return cls(rules.refusal_of(error))


def _out(state: PromoteState, **added: Any) -> PromoteState:
    """The state passed on: the input plus what the step adds (a plain `PromoteState`: only
    StartRun's output keeps a null `run` on the wire)."""
    return PromoteState.model_validate({**dict(state), **added})


def _token(state: PromoteState) -> int:
    if state.token is None:
        raise ValueError("this step runs only under the workflow lease")
    return state.token


def _refusing(error: ServiceError) -> PromoteRefused:
    return PromoteRefused.of(error)


def _promotion(deps: PromoteDeps, state: PromoteStart) -> Promotion:
    promotion = deps.store.get_promotion(state.project_id, state.promotion_id)
    if promotion is None:
        raise _refusing(NotFound(rules.NO_PROMOTION))
    return promotion


def _review(deps: PromoteDeps, promotion: Promotion) -> Review:
    review = deps.store.get_review(promotion.review_id)
    if review is None:
        raise _refusing(NotFound("The review is gone."))
    return review


# --- the lease ---------------------------------------------------------------------------


def lease_ttl(checks: Sequence[CheckDef]) -> timedelta:
    """Long enough for every check to reach its own time limit, one after another, plus
    the margin: the lease never lapses mid-promote, nor outlives a dead one by more. The
    run's own timeout caps the checks' sum: no ReceiptRun execution lasts longer."""
    full = [check.timeout_seconds for check in checks if isinstance(check, FullCheckDef)]
    quick = (len(checks) - len(full)) * QUICK_SANDBOX.deadline_seconds
    run = min(quick + sum(full), RECEIPT_RUN_TIMEOUT_SECONDS)
    return timedelta(seconds=run + LEASE_MARGIN_SECONDS)


def _declared_checks(deps: PromoteDeps, project_id: str, commit: str) -> list[CheckDef]:
    """The reviewed commit's checks; none when absent or invalid (the run then fails fast)."""
    try:
        reader = deps.repos(project_id).open_snapshot(commit).reader(SnapshotBudget())
        text = reader.read(CHECKS_PATH)
        return [] if text is None else parse_checks(text)
    except (SnapshotError, KeyError, ValueError):
        return []


def promote_acquire(deps: PromoteDeps, state: PromoteStart) -> PromoteState:
    """Take the project's lease, reconcile what a dead promote left, recheck consent,
    claim and heads, and begin the promotion (pending: it fences the project)."""
    queued = _promotion(deps, state)
    if queued.state not in ("queued", "pending"):
        raise _refusing(Conflict(rules.JOB_STOPPED))  # settled meanwhile: nothing to do
    project = deps.store.get_project(state.project_id)
    if project is None:
        raise _refusing(NotFound("The project is gone."))
    required = project.effective_settings.require_receipt
    checks = _declared_checks(deps, project.id, queued.commit) if required else []
    ttl = lease_ttl(checks)
    now = deps.clock.now()
    token = deps.store.acquire_lease(project.id, queued.id, ttl, now)
    if token is None:
        raise LeaseBusy(rules.LEASE_BUSY)
    try:
        _begin(deps, queued, token, required, now + ttl)
    except ServiceError as refused:
        deps.store.release_lease(project.id, queued.id, token)
        raise _refusing(refused) from refused
    return PromoteState(
        project_id=state.project_id,
        promotion_id=state.promotion_id,
        token=token,
        lease_seconds=int(ttl.total_seconds()),
        lease_expires_at=format_timestamp(now + ttl),
        required=required,
    )


def _begin(
    deps: PromoteDeps, queued: Promotion, token: int, required: bool, expires: datetime
) -> None:
    rules.reconcile(deps, queued.project_id, keep=queued.id)
    if queued.state == "pending":
        return  # resumed after a crash: begun already under this holder's lease
    review = _review(deps, queued)
    accepted = rules.preconditions(deps, review, queued.commit)
    project = deps.store.get_project(queued.project_id)
    assert project is not None
    pending = queued.model_copy(
        update={
            "state": "pending",
            "accepted_checks_change": accepted,
            "mode": rules.mode_of(project),
            "previous_head": deps.require_fast_forward(queued.project_id, queued.commit),
            # advisory: the digest known now, whatever runs or lands later
            "digest": None if required or review.execution is None else review.execution.digest,
            # the request answers 202 until the lease could have lapsed
            "deadline": max(expires, queued.deadline or expires),
        }
    )
    if not deps.store.begin_promotion(pending, token, deps.clock.now()):
        raise Conflict(rules.FENCED)


def promote_renew(deps: PromoteDeps, state: PromoteState) -> PromoteState:
    """The heartbeat: extend the lease by its TTL; refused once it was lost."""
    ttl = timedelta(seconds=state.lease_seconds or LEASE_MARGIN_SECONDS)
    now = deps.clock.now()
    if not deps.store.renew_lease(state.project_id, state.promotion_id, _token(state), ttl, now):
        raise _refusing(Conflict(rules.LEASE_LOST))
    return _out(state, lease_expires_at=format_timestamp(now + ttl))


def promote_release(deps: PromoteDeps, state: PromoteState) -> PromoteState:
    """Release the lease; a write that raised (uncertain) is first reconciled against
    canonical's head under it, since a promote of a commit canonical already reached is
    refused before it could reconcile it."""
    token = _token(state)
    # A lease is released whatever became of its promotion: a missing one never blocks it.
    promotion = deps.store.get_promotion(state.project_id, state.promotion_id)
    open_write = promotion is not None and promotion.state in OPEN_WRITES
    if open_write and deps.store.check_fence(state.project_id, token, deps.clock.now()):
        rules.reconcile(deps, state.project_id)
    deps.store.release_lease(state.project_id, state.promotion_id, token)
    return _out(state)


# --- the before-promote run --------------------------------------------------------------


def promote_start_run(deps: PromoteDeps, state: PromoteState) -> RunReserved:
    """Required mode: reserve the fresh before-promote generation (the caller starts and
    waits for it). Advisory mode starts no checks: `run` stays null."""
    if not state.required:
        return RunReserved.model_validate({**dict(state), "run": None})
    if not deps.store.check_fence(state.project_id, _token(state), deps.clock.now()):
        raise _refusing(Conflict(rules.LEASE_LOST))
    promotion = _promotion(deps, state)
    review = _review(deps, promotion)
    try:
        run = reserve_run(deps, review, promotion.commit, "before-promote")
    except ServiceError as refused:
        raise _refusing(refused) from refused
    return RunReserved.model_validate({**dict(state), "run": run})


# --- verify ------------------------------------------------------------------------------


def promote_verify(deps: PromoteDeps, state: PromoteState) -> PromoteState:
    """Judge the finished run (required mode), recheck claim and both heads, and arm the
    promotion (writing) under the lease."""
    promotion = _promotion(deps, state)
    if promotion.state != "pending":
        return _out(state, digest=promotion.digest)  # armed already: resumed after a crash
    try:
        digest = (
            _verified_digest(deps, promotion, state.run) if state.required else promotion.digest
        )
        _recheck(deps, promotion)
    except ServiceError as refused:
        raise _refusing(refused) from refused
    now = deps.clock.now()
    if not deps.store.arm_promotion(state.project_id, promotion.id, digest, _token(state), now):
        raise _refusing(Conflict(rules.LEASE_LOST))
    return _out(state, digest=digest)


def _verified_digest(deps: PromoteDeps, promotion: Promotion, run: RunRef | None) -> str:
    """A passing, matching, finished record of exactly this run; anything else refuses
    with the spec's one sentence."""
    review = _review(deps, promotion)
    execution = review.execution
    if run is None or execution is None or execution.is_running:
        raise Conflict(CHECKS_FAILED_BEFORE_PROMOTE)
    evidence = gather_evidence(
        deps,
        review,
        promotion.commit,
        expected_generation=run.generation,
        expected_trigger="before-promote",
    )
    reasons = validate_required(evidence)
    if reasons or execution.digest is None:
        log.info("before-promote checks refused %s: %s", review.id, reasons)
        raise Conflict(CHECKS_FAILED_BEFORE_PROMOTE)
    return execution.digest


def _recheck(deps: PromoteDeps, promotion: Promotion) -> None:
    """Right before arming: the claim and both heads still hold."""
    review = _review(deps, promotion)
    deps.require_live_claim(review)
    deps.require_fork_head(review, promotion.commit)
    if deps.repos(promotion.project_id).head() != promotion.previous_head:
        raise Conflict(rules.CANONICAL_MOVED)


# --- the canonical write -----------------------------------------------------------------


def promote_write(deps: PromoteDeps, state: PromoteState) -> PromoteState:
    """Fast-forward canonical with a compare-and-set, fenced by the lease; the ledger entry
    and the outcome are written in one transaction. An exception during the write leaves
    the promotion uncertain, which fences the project until it is reconciled."""
    promotion = _promotion(deps, state)
    if promotion.state == "writing":
        _write(deps, promotion, _token(state))
    settled = _promotion(deps, state)
    attest_promotion(deps, settled)  # the VSA, once canonical moved
    outcome = _outcome(settled)
    observability.promote_finished(outcome)
    return _out(state, outcome=outcome)


def _outcome(promotion: Promotion) -> str:
    return promotion.state if promotion.state in ("done", "failed") else "uncertain"


def _write(deps: PromoteDeps, promotion: Promotion, token: int) -> None:
    project_id = promotion.project_id
    if not deps.store.check_fence(project_id, token, deps.clock.now()):
        lost = Refusal(kind="conflict", error=rules.LEASE_LOST)
        rules.settle(deps, promotion, "failed", refusal=lost)
        return
    repos = deps.repos(project_id)
    if repos.head() == promotion.commit:
        rules.settle_by_head(deps, promotion)  # landed before a crash: never write twice
        return
    capability = mint_canonical_write_capability(project_id)
    try:
        moved = repos.update_canonical_ref(
            capability, DEFAULT_BRANCH, promotion.previous_head, promotion.commit
        )
    except Exception:
        log.exception("canonical write of promotion %s has an unknown outcome", promotion.id)
        rules.settle(deps, promotion, "uncertain")
        return
    if not moved:
        refusal = Refusal(kind="conflict", error=rules.CANONICAL_MOVED)
        rules.settle(deps, promotion, "failed", refusal=refusal)
    elif not rules.settle(deps, promotion, "done", rules.ledger_entry(deps, promotion)):
        log.error("promotion %s landed but did not settle; it stays open", promotion.id)


# --- the Catch target --------------------------------------------------------------------


def refusal_from_error(error: dict[str, str] | None) -> Refusal:
    """The refusal a caught error carries (`PromoteRefused`'s JSON, or Lambda's wrapping
    of it in `errorMessage`); anything else is the generic failure."""
    if error is None:
        return Refusal(kind="conflict", error=rules.PROMOTE_FAILED)
    name, cause = error.get("Error"), error.get("Cause", "")
    if name == LEASE_BUSY_ERROR:
        return Refusal(kind="conflict", error=rules.LEASE_BUSY)
    if name != REFUSED_ERROR:
        return Refusal(kind="conflict", error=rules.PROMOTE_FAILED)
    try:
        message = json.loads(cause)
        if isinstance(message, dict) and "errorMessage" in message:
            message = json.loads(message["errorMessage"])
        return Refusal.model_validate(message)
    except (ValueError, TypeError, ValidationError):
        return Refusal(kind="conflict", error=rules.PROMOTE_FAILED)


def error_of(exception: BaseException) -> dict[str, str]:
    """How the local supervisor hands a step's exception to settle: as Step Functions does."""
    return {"Error": type(exception).__name__, "Cause": str(exception)}


def promote_settle(deps: PromoteDeps, state: PromoteState) -> PromoteState:
    """Record a refused or failed workflow's outcome and release its lease (retaken as the
    holder: the error path may not know the token, e.g. when acquire itself failed). A
    promotion already writing or uncertain is reconciled against canonical's head while the
    lease is held, as a dead workflow's is (`settle_stopped`): its writer has stopped, and
    left open it would read as pending and then fence the project, while a promote of the
    same commit is refused before it could reconcile it (canonical may be there already)."""
    promotion = deps.store.get_promotion(state.project_id, state.promotion_id)
    if promotion is not None and promotion.state in ("queued", "pending"):
        rules.settle(deps, promotion, "failed", refusal=refusal_from_error(state.error))
    if promotion is not None:
        _abandon_before_promote_run(deps, promotion)
    with _as_holder(deps, state.project_id, state.promotion_id) as token:
        if token is not None and promotion is not None and promotion.state in OPEN_WRITES:
            rules.reconcile(deps, state.project_id)
    current = deps.store.get_promotion(state.project_id, state.promotion_id)
    if current is not None:
        attest_promotion(deps, current)  # a write that landed but was not attested yet
    outcome = "failed" if current is None else _outcome(current)
    observability.promote_finished(outcome)
    return _out(state, outcome=outcome)


def _retake(deps: PromoteDeps, project_id: str, holder: str) -> int | None:
    """A new token for `holder`: only while the lease is the holder's or free."""
    ttl = timedelta(seconds=LEASE_MARGIN_SECONDS)
    return deps.store.acquire_lease(project_id, holder, ttl, deps.clock.now())


@contextlib.contextmanager
def _as_holder(deps: PromoteDeps, project_id: str, holder: str) -> Iterator[int | None]:
    """Hold the lease as `holder` (the promotion) for the block, then release it. Retaking
    it (a new token) succeeds only while it is the holder's or free: None when another
    workflow holds it."""
    token = _retake(deps, project_id, holder)
    try:
        yield token
    finally:
        if token is not None:
            deps.store.release_lease(project_id, holder, token)


def _abandon_before_promote_run(deps: PromoteDeps, promotion: Promotion) -> None:
    """A before-promote run still running when its workflow settles was reserved but never
    started (the step after StartRun failed) or was stopped: nothing will end it, so it
    ends as interrupted. The workflow holds the project's lease, so no other promote's run
    of this review can be running."""
    review = deps.store.get_review(promotion.review_id)
    execution = None if review is None else review.execution
    if review is None or execution is None or not execution.is_running:
        return
    if execution.trigger != "before-promote":
        return
    abandon_run(deps, review.run_of(execution))


# --- a workflow that died ----------------------------------------------------------------


def settle_stopped(deps: PromoteDeps, project_id: str, promotion_id: str) -> str | None:
    """Settle what a workflow that died without settling left (its process was killed, or
    its execution ended FAILED, TIMED_OUT or ABORTED), and free its lease. A queued or
    pending promotion never wrote: it fails with the stopped answer. A writing or uncertain
    one is reconciled against canonical's head, holding the lease; while another workflow
    holds it, the promotion stays open, fencing, and that workflow's acquire reconciles it.
    Returns the promotion's state after (None when there is no such promotion)."""
    promotion = deps.store.get_promotion(project_id, promotion_id)
    if promotion is None:
        return None
    if promotion.state == "queued":
        rules.settle(deps, promotion, "failed", refusal=rules.STOPPED)
    with _as_holder(deps, project_id, promotion_id) as token:
        if token is not None and promotion.state in ("pending", "writing", "uncertain"):
            rules.reconcile(deps, project_id)
    current = deps.store.get_promotion(project_id, promotion_id)
    return None if current is None else current.state
