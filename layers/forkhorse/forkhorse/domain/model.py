"""The state the Store keeps: principals, projects, forks, packets, claims,
reviews with their current execution, approvals, promotions, the ledger and the
per-project workflow lease. Pure data, no I/O.
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, PositiveInt, model_validator

from forkhorse.domain.receipts import ReceiptSummary, Trigger
from forkhorse.domain.run import RunRef
from forkhorse.domain.wire import WIRE_CONFIG


class _State(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProjectSettings(BaseModel):
    """The owner's settings; on the wire exactly `{"requireReceipt": bool}`."""

    model_config = WIRE_CONFIG

    require_receipt: bool


class ProjectPolicy(BaseModel):
    """The owner's policy, beside the spec's settings; on the wire `{"protectChecks": bool}`.
    Off by default, so the spec's behaviour is the default."""

    model_config = WIRE_CONFIG

    protect_checks: bool = False


DEFAULT_POLICY = ProjectPolicy()

ChecksChangeKind = Literal["removed", "changed", "added"]


class CheckChange(BaseModel):
    """One check that differs between canonical's head and a reviewed commit: `before` and
    `after` are the check's fingerprints there (None where it is not declared)."""

    model_config = WIRE_CONFIG

    check: str
    change: ChecksChangeKind
    before: str | None
    after: str | None


# A project stored before settings existed reads as advisory until its owner opts in.
LEGACY_SETTINGS = ProjectSettings(require_receipt=False)

PrincipalKind = Literal["owner", "agent"]


class Principal(_State):
    """Who a bearer token belongs to. Tokens themselves are never stored, only their hashes."""

    kind: PrincipalKind
    id: str
    name: str
    created_at: AwareDatetime
    revoked: bool = False


class Project(_State):
    """A project. `settings` is None only for a legacy project stored before settings
    existed; the Store reads such a project with `LEGACY_SETTINGS` filled in."""

    id: str
    name: str
    owner_id: str
    created_at: AwareDatetime
    settings: ProjectSettings | None = None
    policy: ProjectPolicy = DEFAULT_POLICY

    @property
    def effective_settings(self) -> ProjectSettings:
        return self.settings or LEGACY_SETTINGS

    @property
    def protects_checks(self) -> bool:
        """The protected-checks policy applies: it is on, and receipts are required."""
        return self.effective_settings.require_receipt and self.policy.protect_checks


class Fork(_State):
    id: str
    project_id: str
    name: str
    owner_agent_id: str
    created_at: AwareDatetime


class Packet(_State):
    id: str
    project_id: str
    title: str
    created_at: AwareDatetime


class Claim(_State):
    """A lease on a packet: live while `now < expires_at`."""

    packet_id: str
    agent_id: str
    claimed_at: AwareDatetime
    expires_at: AwareDatetime

    def is_live(self, now: datetime) -> bool:
        return now < self.expires_at


class Execution(_State):
    """A review's current execution. Its summary carries status and attached digest."""

    generation: str
    commit: str
    trigger: Trigger
    summary: ReceiptSummary

    @property
    def is_running(self) -> bool:
        return self.summary.status == "running"

    @property
    def digest(self) -> str | None:
        return self.summary.digest


class Approval(_State):
    """Owner consent for one exact commit, given against the receipt current at that time."""

    commit: str
    owner_id: str
    approved_at: AwareDatetime
    generation: str | None
    digest: str | None
    require_receipt: bool
    # The protected checks change (removed or changed checks) the owner explicitly accepted.
    accepted_checks_change: tuple[CheckChange, ...] = ()


class Review(_State):
    id: str
    project_id: str
    packet_id: str
    fork_id: str
    agent_id: str
    commit: str
    created_at: AwareDatetime
    # A push to the fork moves the review to the new head (while the claim is live).
    follow_pushes: bool = False
    execution: Execution | None = None
    approval: Approval | None = None

    def run(self, generation: str, trigger: Trigger, commit: str) -> RunRef:
        """The reference each step of one of this review's executions works for."""
        return RunRef(
            project_id=self.project_id,
            review_id=self.id,
            generation=generation,
            trigger=trigger,
            commit=commit,
        )

    def run_of(self, execution: Execution) -> RunRef:
        return self.run(execution.generation, execution.trigger, execution.commit)


class InvalidatedExecution(_State):
    """A running execution that a restart turned into an infrastructure error."""

    review_id: str
    project_id: str
    generation: str


PromotionState = Literal["queued", "pending", "writing", "uncertain", "done", "failed"]
PromotionMode = Literal["required", "advisory"]
SettledState = Literal["uncertain", "done", "failed"]
# pending: begun under the workflow lease, checks may run, canonical untouched;
# writing: armed with its digest, the canonical compare-and-set may land.
OPEN_PROMOTION_STATES: frozenset[PromotionState] = frozenset({"pending", "writing", "uncertain"})
# The states of a promotion whose job has not ended (queued: requested, not yet under the lease).
IN_FLIGHT_STATES: frozenset[PromotionState] = frozenset({"queued", "pending", "writing"})


# Why a request is refused; each edge maps a kind to its own answer (the API to a status).
RefusalKind = Literal[
    "invalid", "unauthenticated", "forbidden", "not-found", "conflict", "too-large", "unsupported"
]
# Refusals stored before they had kinds carry the HTTP status they were answered with.
_KIND_OF_STATUS: dict[int, RefusalKind] = {
    400: "invalid",
    401: "unauthenticated",
    403: "forbidden",
    404: "not-found",
    409: "conflict",
    413: "too-large",
    415: "unsupported",
}


class Refusal(_State):
    """What a refused promote job answers, in any process: kind, sentence and reasons."""

    kind: RefusalKind
    error: str
    reasons: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _kind_of_status(cls, data: Any) -> Any:
        """A promotion settled, or a Cause raised, by an earlier version names a status."""
        if not (isinstance(data, dict) and "status" in data and "kind" not in data):
            return data
        kind = _KIND_OF_STATUS.get(data["status"])
        if kind is None:
            raise ValueError(f"a refusal's status must be one of {sorted(_KIND_OF_STATUS)}")
        return {key: value for key, value in data.items() if key != "status"} | {"kind": kind}


class Promotion(_State):
    """One promote attempt. While pending, writing or uncertain it fences further promotes."""

    id: str
    project_id: str
    review_id: str
    commit: str
    state: PromotionState = "pending"
    digest: str | None = None
    # Whether receipts gated this promote (the project's setting when it began), and the
    # canonical head it moves from, so an uncertain outcome can be reconciled.
    mode: PromotionMode | None = None
    previous_head: str | None = None
    started_at: AwareDatetime
    settled_at: AwareDatetime | None = None
    # A requested promotion's job ends before this; past it an unsettled job is presumed dead.
    deadline: AwareDatetime | None = None
    # Why a failed promotion was refused (None on older records).
    refusal: Refusal | None = None
    # The accepted checks change this promote relied on, for its ledger entry.
    accepted_checks_change: tuple[CheckChange, ...] = ()

    def job_is_live(self, now: datetime) -> bool:
        """Its job may still be running: in flight, and not past its deadline."""
        return self.state in IN_FLIGHT_STATES and self.deadline is not None and now < self.deadline


class LedgerEntry(_State):
    """What a done promotion did to canonical, with the digest known at promotion."""

    project_id: str
    promotion_id: str
    review_id: str
    commit: str
    previous_head: str | None
    digest: str | None
    promoted_at: AwareDatetime
    accepted_checks_change: tuple[CheckChange, ...] = ()


class Lease(_State):
    """The per-project workflow mutex. `token` is a fencing token: it only grows."""

    project_id: str
    holder: str
    token: PositiveInt
    expires_at: AwareDatetime

    def is_live(self, now: datetime) -> bool:
        return now < self.expires_at


# --- rules both Store adapters apply inside their transactions -------------------------


def with_effective_settings(project: Project) -> Project:
    """How a stored project reads: a legacy project gets `LEGACY_SETTINGS`."""
    return project.model_copy(update={"settings": project.effective_settings})


def is_current_running(execution: Execution | None, generation: str) -> bool:
    return execution is not None and execution.generation == generation and execution.is_running


def started_execution(
    commit: str, trigger: Trigger, generation: str, summary: ReceiptSummary
) -> Execution:
    """A new current execution: its digest starts cleared (only attach sets one)."""
    return Execution(
        generation=generation,
        commit=commit,
        trigger=trigger,
        summary=summary.model_copy(update={"digest": None}),
    )


def fence_holds(lease: Lease | None, token: int, now: datetime) -> bool:
    """A fenced write is allowed only under the project's current, live lease token."""
    return lease is not None and lease.token == token and lease.is_live(now)


def check_settlement(
    state: SettledState, ledger_entry: LedgerEntry | None, refusal: Refusal | None = None
) -> None:
    """A done promotion writes exactly one ledger entry; other outcomes write none. Only a
    failed one carries a refusal."""
    if (state == "done") != (ledger_entry is not None):
        raise ValueError("a done promotion needs its ledger entry, and only a done one")
    if refusal is not None and state != "failed":
        raise ValueError("only a failed promotion carries a refusal")


def may_settle(promotion: Promotion, state: SettledState) -> bool:
    """queued -> failed (it never ran); pending|writing -> done|failed|uncertain;
    uncertain -> done|failed (reconciliation)."""
    if promotion.state == "queued":
        return state == "failed"
    if promotion.state in ("pending", "writing"):
        return True
    return promotion.state == "uncertain" and state != "uncertain"


def settled(
    promotion: Promotion, state: SettledState, now: datetime, refusal: Refusal | None
) -> Promotion:
    return promotion.model_copy(update={"state": state, "settled_at": now, "refusal": refusal})


def may_request(promotions: Iterable[Promotion], now: datetime) -> bool:
    """A review gets a new promote job unless one of its requested jobs may still run."""
    return not any(promotion.job_is_live(now) for promotion in promotions)


def require_no_digest(summary: ReceiptSummary) -> None:
    if summary.digest is not None:
        raise ValueError("only attach sets a digest")


def current_receipt(review: Review) -> tuple[str | None, str | None]:
    """(generation, digest) of the review's current execution, what approval compares."""
    execution = review.execution
    return (None, None) if execution is None else (execution.generation, execution.digest)
