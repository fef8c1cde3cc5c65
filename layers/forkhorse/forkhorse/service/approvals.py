"""Approval: owner consent for one exact commit, gated in required mode."""

from __future__ import annotations

from forkhorse import records
from forkhorse.domain.canonical import RecordCorruptedError
from forkhorse.domain.checks import (
    CHECKS_PATH,
    GlobSet,
    InvalidChecksConfig,
    QuickCheckDef,
    parse_checks,
)
from forkhorse.domain.checks_change import (
    ChecksDiff,
    DeclaredCheck,
    PathChange,
    ProtectedPathsUncompared,
    changed_protected_paths,
    declared_checks,
    diff_checks,
    unaccepted_reasons,
    with_protected_changes,
)
from forkhorse.domain.gate import Definitions, GateEvidence, validate_required
from forkhorse.domain.model import Approval, CheckChange, Project, Review
from forkhorse.domain.receipts import ReceiptRecord, Trigger
from forkhorse.domain.snapshot import SnapshotBudget, SnapshotError
from forkhorse.ports.git import GitStore
from forkhorse.responses import ApprovalBody
from forkhorse.service.context import Context
from forkhorse.service.errors import Conflict
from forkhorse.service.identity import Caller
from forkhorse.service.log_events import approval_entry
from forkhorse.service.views import approval_view

GATE_REFUSED = "The receipt does not satisfy the required gate."


def gather_evidence(
    context: Context,
    review: Review,
    commit: str,
    *,
    expected_generation: str | None = None,
    expected_trigger: Trigger | None = None,
) -> GateEvidence:
    """Read what the gate judges: the attached record (verified by digest) and the exact
    commit's checks and quick module sources, read again from that commit."""
    execution = review.execution
    record: ReceiptRecord | None = None
    altered = refused = False
    if execution is not None and execution.digest is not None:
        try:
            record = records.get_record(context.store, execution.digest)
        except records.RecordRefusedError:
            refused = True
        except RecordCorruptedError:
            altered = True
    definitions, sources = read_definitions(context.repos(review.project_id), commit)
    return GateEvidence(
        review_id=review.id,
        project_id=review.project_id,
        commit=commit,
        review_commit=review.commit,
        execution=execution,
        record=record,
        definitions=definitions,
        module_sources=sources,
        record_altered=altered,
        record_refused=refused,
        expected_generation=expected_generation,
        expected_trigger=expected_trigger,
    )


def read_definitions(repos: GitStore, commit: str) -> tuple[Definitions, dict[str, str | None]]:
    """A commit's checks and its quick modules' sources, read under the snapshot budgets."""
    try:
        reader = repos.open_snapshot(commit).reader(SnapshotBudget())
        text = reader.read(CHECKS_PATH)
        if text is None:
            return Definitions(absent=True), {}
        checks = parse_checks(text)
    except (SnapshotError, KeyError, ValueError) as unreadable:
        message = unreadable.message if isinstance(unreadable, InvalidChecksConfig) else None
        return Definitions(error=message or "the commit could not be read."), {}
    sources: dict[str, str | None] = {}
    for check in checks:
        if isinstance(check, QuickCheckDef):
            sources[check.module] = _read_or_none(repos, commit, check.module)
    return Definitions(checks=checks), sources


def _read_or_none(repos: GitStore, commit: str, path: str) -> str | None:
    try:
        return repos.open_snapshot(commit).reader(SnapshotBudget()).read(path)
    except SnapshotError:
        return None


def checks_diff(
    context: Context, project_id: str, commit: str, reviewed: GateEvidence | None = None
) -> ChecksDiff:
    """Canonical's head's checks against `commit`'s (read again unless `reviewed` already
    holds them), each check with the paths it protects that differ between the two.
    With no canonical head yet, nothing is protected: every check is added."""
    repos = context.repos(project_id)
    head = repos.head()
    base = {} if head is None else _declared(repos, head)
    if reviewed is None:
        declared = _declared(repos, commit)
    else:
        declared = declared_checks(reviewed.definitions, reviewed.module_sources)
    if head is not None:
        base, declared = _with_protected_paths(repos, head, commit, base, declared)
    return diff_checks(base, declared)


def _declared(repos: GitStore, commit: str) -> dict[str, DeclaredCheck]:
    return declared_checks(*read_definitions(repos, commit))


def _with_protected_paths(
    repos: GitStore,
    canonical: str,
    commit: str,
    base: dict[str, DeclaredCheck],
    head: dict[str, DeclaredCheck],
) -> tuple[dict[str, DeclaredCheck], dict[str, DeclaredCheck]]:
    """Both sides' checks with the protected paths that differ: one bounded walk of the
    trees that differ between canonical's head and the commit (an unreadable commit or
    tree fails closed, as uncompared paths)."""
    trees: tuple[str, str] | None
    try:
        trees = (repos.read_commit(canonical).tree, repos.read_commit(commit).tree)
    except (SnapshotError, KeyError, ValueError):
        trees = None

    def compare(globs: GlobSet) -> dict[str, PathChange]:
        if trees is None:
            raise ProtectedPathsUncompared()
        try:
            return changed_protected_paths(repos.read_tree, *trees, globs)
        except (SnapshotError, KeyError, ValueError) as unreadable:
            raise ProtectedPathsUncompared() from unreadable

    return with_protected_changes(base, head, compare, trees or (canonical, commit))


RECEIPT_CHANGED = "The review's receipt changed while approving; try again."
COMMIT_CHANGED = "The review moved to another commit while approving; try again."


class Approvals:
    def __init__(self, context: Context) -> None:
        self._c = context

    def approve(
        self,
        caller: Caller,
        project_id: str,
        review_id: str,
        commit: str,
        accept_checks_change: bool = False,
    ) -> ApprovalBody:
        project = self._c.owned_project(caller, project_id, "approve reviews")
        review = self._c.visible_review(caller, project, review_id)
        required = project.effective_settings.require_receipt
        accepted = self.check(project, review, commit, accept_checks_change)
        execution = review.execution
        generation = None if execution is None else execution.generation
        digest = None if execution is None else execution.digest
        approval = Approval(
            commit=commit,
            owner_id=caller.id,
            approved_at=self._c.clock.now(),
            generation=generation,
            digest=digest,
            require_receipt=required,
            accepted_checks_change=accepted,
        )
        # Required: consent binds to the receipt the gate just judged. Advisory: approve
        # ignores receipt status, digest changes and in-flight runs (the spec), so only
        # the commit is compared.
        stored = self._c.gate_log.earned(
            approval_entry(project.id, review.id, approval),
            lambda: self._c.store.approve(
                review.id, approval, digest, generation, compare_receipt=required
            ),
        )
        if not stored:
            raise Conflict(RECEIPT_CHANGED if required else COMMIT_CHANGED)
        return ApprovalBody(approval=approval_view(approval))

    def check(
        self, project: Project, review: Review, commit: str, accept_checks_change: bool = False
    ) -> tuple[CheckChange, ...]:
        """Every refusal of approve, in order, as a `Conflict`; the gate's carries reasons.
        The console's gate view calls this too, so it shows exactly what approve decides.
        Returns the checks change the approval accepts (none unless the policy applies)."""
        if review.commit != commit:
            raise Conflict(f"The review is at commit {review.commit}, not {commit}.")
        required = project.effective_settings.require_receipt
        evidence = gather_evidence(self._c, review, commit) if required else None
        diff = None
        if evidence is not None and project.protects_checks:
            diff = checks_diff(self._c, project.id, commit, reviewed=evidence)
        self._require_not_approved(review, commit, diff)
        self._c.require_live_claim(review)
        self._c.require_fork_head(review, commit)
        if evidence is None:
            return ()
        reasons = validate_required(evidence)
        if diff is not None and not accept_checks_change:
            reasons += diff.reasons()
        if reasons:
            raise Conflict(GATE_REFUSED, reasons=reasons)
        return () if diff is None else diff.protected

    @staticmethod
    def _require_not_approved(review: Review, commit: str, diff: ChecksDiff | None) -> None:
        """A second approval of a commit is refused, unless the consent it holds does not
        cover the current checks change (the policy, or canonical's checks, moved since)."""
        approval = review.approval
        if approval is None or approval.commit != commit:
            return
        if diff is None or not unaccepted_reasons(diff, approval.accepted_checks_change):
            raise Conflict("This commit is already approved.")
