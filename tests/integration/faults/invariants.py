"""The invariants a crash at any write must leave intact (DESIGN.md, Invariants), checked on
a restarted local app, and the walk that finishes a crashed path as a user would."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from forkhorse.adapters.containers.common import DEPLOYMENT_LABEL
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.domain.log_entries import promotion_key, receipt_key
from forkhorse.domain.model import Review
from forkhorse.ports.git import DEFAULT_BRANCH, GitStore
from forkhorse.ports.store import Store
from forkhorse.records import get_json, get_record
from forkhorse.responses import ErrorBody, Promoted
from forkhorse.runner.workflow.steps import EXPORT_PREFIX
from forkhorse.service.errors import ServiceError
from forkhorse.service.facade import Service
from forkhorse.service.identity import Caller
from forkhorse.service.log_events import approval_entry
from forkhorse.service.log_repair import repair_intents
from forkhorse.wiring.local import LocalApp

from tests.integration.faults.path_worker import OWNER, RUN_SECONDS
from tests.support.status import http_status

RECOVERY_SECONDS = 60.0


def settled(app: LocalApp, ids: dict[str, str]) -> None:
    """Wait for the restart's recovery, then for every resumed promote to end."""
    assert app.runtime.supervisor.recovered(RECOVERY_SECONDS), "receipt recovery hung"
    assert app.promotes.recovered(RECOVERY_SECONDS), "promote recovery hung"
    for promotion in app.runtime.store.list_promotions(ids["project"]):
        assert app.promotes.wait(promotion.id, RUN_SECONDS), "a resumed promote hung"


@dataclass(frozen=True)
class Deployment:
    """What a user can read, from whichever side (local app or AWS) the path ran on."""

    service: Service
    store: Store
    repos: GitStore
    now: datetime


def local(app: LocalApp, ids: dict[str, str]) -> Deployment:
    runtime = app.runtime
    return Deployment(
        app.service, runtime.store, runtime.git.store(ids["project"]), runtime.deps.clock.now()
    )


def check_local(app: LocalApp, ids: dict[str, str], *, restarted: bool = True) -> None:
    """The invariants, and every promote workflow ended. Without a restart a workflow whose
    journal write failed (its start, or its end) may stay unfinished in the journal, but
    only with its promotion settled: the next start's resume ends it, writing nothing."""
    check_invariants(local(app, ids), ids)
    check_log(app)
    store, journal = app.runtime.store, app.runtime.journal
    unfinished = journal.unfinished()
    if restarted:
        assert unfinished == [], "every promote workflow ended"
    for promotion_id in unfinished:
        promotion = store.get_promotion(ids["project"], promotion_id)
        assert promotion is not None
        assert promotion.state in ("done", "failed"), promotion


def check_log(app: LocalApp) -> None:
    """The log and the store agree once the upkeep ran (at a restart, or its next round in
    a live server): every signed envelope and every approval has its entry, every entry's
    object is the one logged, and the newest checkpoint covers the whole ledger."""
    repair_intents(app.service.context)
    report = app.runtime.log_check.run(full=True)
    assert report["ok"], report["problems"]
    transparency = app.service.log
    assert transparency is not None
    head = transparency.head()
    assert head.published == head.size, "a logged entry no checkpoint covers"
    with sqlite3.connect(app.runtime.store.path) as db:
        subjects = [row[0] for row in db.execute("SELECT subject FROM attestations")]
    for subject in subjects:
        kind, _, rest = subject.partition("/")
        key = receipt_key(rest) if kind == "receipt" else promotion_key(*rest.split("/"))
        assert transparency.index_of(key) is not None, f"{subject} is signed but not logged"
    for project in app.runtime.store.list_projects():
        for review in app.runtime.store.list_reviews(project.id):
            if review.approval is not None:
                key = approval_entry(project.id, review.id, review.approval).key
                assert transparency.index_of(key) is not None, "an approval is not logged"


def check_invariants(deployment: Deployment, ids: dict[str, str]) -> None:
    """Everything a user can read is whole and consistent, whatever write the crash hit."""
    store, project = deployment.store, ids["project"]
    for review in store.list_reviews(project):
        _check_receipt(store, review)
        _check_consent(store, review)
    # Invariant 1: every visible record, attached or not, is whole and verifies.
    for stale in store.stale_records(deployment.now + timedelta(days=1)):
        if stale.has_manifest:
            assert get_json(store, stale.digest) is not None  # verified against its digest
    # Invariant 4: canonical moved at most once, by a fast-forward with its ledger entry;
    # a write of unknown outcome leaves its promotion open (uncertain), fencing, until the
    # next promote reconciles it against canonical's head.
    head = deployment.repos.head()
    ledger = [(e.commit, e.previous_head) for e in store.ledger(project)]
    fence = store.open_promotion(project)
    assert head in (ids["initial"], ids["commit"])
    assert len(ledger) <= 1, f"a double fast-forward: {ledger}"
    if ledger:
        assert (head, ledger) == (ids["commit"], [(ids["commit"], ids["initial"])])
    elif head == ids["commit"]:
        assert fence is not None, "canonical moved with no ledger entry and no fence"
    # Every promotion's outcome is readable; only a possibly landed write stays open.
    if fence is not None:
        assert fence.state in ("writing", "uncertain"), fence
    for review in {p.review_id for p in store.list_promotions(project)}:
        answer = deployment.service.promotions.status(OWNER, project, review)
        assert http_status(answer) in (200, 409), answer
        assert isinstance(answer.body, Promoted if http_status(answer) == 200 else ErrorBody), (
            answer
        )


def _check_receipt(store: Store, review: Review) -> None:
    """Invariants 1, 2 and 6: no run is left running; an attached digest names a whole
    record of this review's current generation and commit."""
    execution = review.execution
    if execution is None:
        return
    assert not execution.is_running, "a restart leaves no execution running"
    if execution.digest is None:
        return
    record = get_record(store, execution.digest)
    assert record is not None, "an attached digest names no record"
    current = (record.review_id, record.generation, record.commit)
    assert current == (review.id, execution.generation, execution.commit), "a stale digest"
    assert record.status == execution.summary.status


def _check_consent(store: Store, review: Review) -> None:
    """Invariant 3: consent names the review's exact commit and the passing record judged."""
    approval = review.approval
    if approval is None:
        return
    assert approval.commit == review.commit, "consent for another commit"
    assert approval.digest is not None, "required mode consents to a receipt"
    record = get_record(store, approval.digest)
    assert record is not None
    assert (record.commit, record.status) == (approval.commit, "passed")


def complete(deployment: Deployment, ids: dict[str, str]) -> None:
    """Finish the path from wherever the crash left it, as the agent and owner would:
    push again, request a review again, approve, promote (again)."""
    service, store, repos = deployment.service, deployment.store, deployment.repos
    project, commit = ids["project"], ids["commit"]
    if store.ledger(project):
        return
    if repos.head(ids["fork"]) != commit:
        assert repos.update_fork_ref(ids["fork"], DEFAULT_BRANCH, ids["initial"], commit)
    review = next(iter(store.list_reviews(project)[-1:]), None)
    if review is None or review.approval is None:
        review = _reviewed(deployment, ids)
        service.approvals.approve(OWNER, project, review.id, commit)
    answer = service.promotions.promote(OWNER, project, review.id, commit, wait_seconds=0)
    deadline = time.monotonic() + RUN_SECONDS
    while answer.pending and time.monotonic() < deadline:
        time.sleep(0.1)
        answer = service.promotions.status(OWNER, project, review.id)
    assert http_status(answer) == 200, answer.body
    assert [entry.commit for entry in store.ledger(project)] == [commit]
    assert repos.head() == commit


def _reviewed(deployment: Deployment, ids: dict[str, str]) -> Review:
    agent = Caller(ids["agent"], "agent")
    try:
        requested = deployment.service.reviews.request(
            agent, ids["project"], ids["packet"], ids["fork"], ids["commit"], False
        )
    except ServiceError as refused:
        raise AssertionError(f"the review request was refused: {refused.message}") from None
    review_id = requested.review.id
    deadline = time.monotonic() + RUN_SECONDS
    while True:
        review = deployment.store.get_review(review_id)
        assert review is not None
        assert review.execution is not None
        if not review.execution.is_running:
            assert review.execution.summary.status == "passed", review.execution.summary
            return review
        assert time.monotonic() < deadline, "the review's run did not finish"
        time.sleep(0.05)


def leftovers(home: Path, deployment: str) -> list[str]:
    """What a closed app must not leave: its containers, exports, workspaces, temp files."""
    listed = Podman().output(
        "ps", "--all", "--format", "json", "--filter", f"label={DEPLOYMENT_LABEL}={deployment}"
    )
    found = [f"container {c['Id'][:12]}" for c in json.loads(listed or "[]")]
    for directory in ("checkouts", "runs"):
        found += [f"{directory}/{p.name}" for p in (home / directory).iterdir()]
    found += [
        str(path.relative_to(home))
        for path in home.rglob("*")
        if path.name.startswith((".", EXPORT_PREFIX)) or "tmp" in path.name
    ]
    return found
