"""What every use case shares: the ports, the settings and the access rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from forkhorse.attest.attestor import Attestor
from forkhorse.domain.model import Fork, Project, Review
from forkhorse.domain.snapshot import SnapshotUnavailable
from forkhorse.ports.ancestry import CommitAncestry, HistoryTooLong
from forkhorse.ports.clock import Clock
from forkhorse.ports.git import GitHost, GitStore
from forkhorse.ports.orchestrator import Orchestrator
from forkhorse.ports.store import Store
from forkhorse.service.ancestry import GenerationAncestry
from forkhorse.service.errors import (
    PROJECT_NOT_FOUND,
    REVIEW_NOT_FOUND,
    Conflict,
    Forbidden,
    NotFound,
)
from forkhorse.service.identity import Caller
from forkhorse.service.log_events import GateLog


def may_see_review(caller: Caller, review: Review, published: set[str]) -> bool:
    """Agents see their own reviews, and others' only once their commit is on canonical (a
    fork head nobody promoted is that agent's unpublished work); owners see every review."""
    return caller.is_owner or review.agent_id == caller.id or review.commit in published


@dataclass(frozen=True)
class ServiceSettings:
    public_url: str = "http://127.0.0.1:8787"
    claim_ttl: timedelta = timedelta(hours=2)
    # How long a promote request waits for its job before answering 202, and how often it
    # rereads the job's promotion meanwhile.
    promote_wait_seconds: float = 25.0
    promote_poll_seconds: float = 0.05
    # How long a promote job waits for the lease: promotes of one project queue on it.
    lease_wait_seconds: float = 2400.0
    # A requested promote job ends within this (lease wait, run and write); past it an
    # unsettled job is presumed dead, and its review may promote again.
    promote_job_seconds: float = 4500.0


@dataclass(frozen=True)
class Context:
    store: Store
    git: GitHost
    orchestrator: Orchestrator
    clock: Clock
    settings: ServiceSettings
    # Signed evidence: reads everywhere, signs only where it holds a key (the trusted steps).
    attestor: Attestor | None = None
    # Bounded, remembered ancestry (issue 28); in process memory unless a memo is given.
    ancestry: CommitAncestry = field(default_factory=GenerationAncestry)
    # The transparency log's appends (issue 33); does nothing where no log is configured.
    gate_log: GateLog = field(default_factory=GateLog)

    # --- roles ----------------------------------------------------------------------
    @staticmethod
    def require_owner(caller: Caller, action: str) -> None:
        if not caller.is_owner:
            raise Forbidden(f"Only an owner may {action}.")

    @staticmethod
    def require_agent(caller: Caller, action: str) -> None:
        if not caller.is_agent:
            raise Forbidden(f"Only an agent may {action}.")

    # --- lookups that also decide visibility -----------------------------------------
    def owned_project(self, caller: Caller, project_id: str, action: str) -> Project:
        """The caller's own project; another owner's project reads as unknown."""
        self.require_owner(caller, action)
        project = self.store.get_project(project_id)
        if project is None or project.owner_id != caller.id:
            raise NotFound(PROJECT_NOT_FOUND)
        return project

    def member_project(self, caller: Caller, project_id: str, action: str) -> Project:
        self.require_agent(caller, action)
        project = self.store.get_project(project_id)
        if project is None:
            raise NotFound(PROJECT_NOT_FOUND)
        if not self.store.is_member(project_id, caller.id):
            raise Forbidden("This agent is not a member of the project.")
        return project

    def visible_project(self, caller: Caller, project_id: str, action: str) -> Project:
        if caller.is_owner:
            return self.owned_project(caller, project_id, action)
        return self.member_project(caller, project_id, action)

    def visible_review(self, caller: Caller, project: Project, review_id: str) -> Review:
        """The project's review, if `may_see_review` lets the caller see it; every route
        that names a review reads it here, so a review an agent may not see reads as unknown
        on all of them alike."""
        review = self.store.get_review(review_id)
        if review is None or review.project_id != project.id:
            raise NotFound(REVIEW_NOT_FOUND)
        published = self._published(caller, review)
        if not may_see_review(caller, review, published):
            raise NotFound(REVIEW_NOT_FOUND)
        return review

    def _published(self, caller: Caller, review: Review) -> set[str]:
        if caller.is_owner or review.agent_id == caller.id:
            return set()  # nothing to look up: the caller sees it anyway
        return self.store.published_commits(review.project_id, {review.commit})

    def fork_of(self, project: Project, fork_id: str) -> Fork:
        fork = self.store.get_fork(project.id, fork_id)
        if fork is None:
            raise NotFound("Fork not found.")
        return fork

    def repos(self, project_id: str) -> GitStore:
        return self.git.store(project_id)

    # --- facts both workflows recheck --------------------------------------------------
    def require_live_claim(self, review: Review) -> None:
        claim = self.store.live_claim(review.packet_id, self.clock.now())
        if claim is None or claim.agent_id != review.agent_id:
            raise Conflict("The agent's claim on the review's packet is not live.")

    def require_fork_head(self, review: Review, commit: str) -> None:
        head = self.repos(review.project_id).head(review.fork_id)
        if head != commit:
            raise Conflict(f"The fork's head is {head}, not commit {commit}.")

    def require_fast_forward(self, project_id: str, commit: str) -> str | None:
        """Canonical's head, if `commit` fast-forwards it (an empty canonical takes anything)."""
        head = self.repos(project_id).head()
        if head == commit:
            # Promoting it again would only add a second ledger entry for the same head.
            raise Conflict(f"Canonical is already at commit {commit}; there is nothing to promote.")
        try:
            if head is not None and not self.is_ancestor(project_id, head, commit):
                raise Conflict(f"Commit {commit} does not fast-forward canonical ({head}).")
        except SnapshotUnavailable as not_commit:
            raise Conflict(f"{commit} is not a commit (a tag or another object).") from not_commit
        except HistoryTooLong as too_long:
            raise Conflict(
                f"Commit {commit} adds too much history to check against canonical in one"
                f" request ({too_long}); what was read is kept, so ask again to go on."
            ) from too_long
        return head

    def is_ancestor(self, project_id: str, ancestor: str, descendant: str) -> bool:
        return self.ancestry.is_ancestor(self.repos(project_id), ancestor, descendant)
