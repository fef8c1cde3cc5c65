"""The protected-checks policy in the Store: the project's policy beside its settings, and
the accepted checks change kept with the owner's consent, the promotion and its ledger entry."""

import json
from datetime import timedelta
from pathlib import Path

from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.domain.model import (
    DEFAULT_POLICY,
    Approval,
    CheckChange,
    LedgerEntry,
    Project,
    ProjectPolicy,
    ProjectSettings,
    Promotion,
)
from forkhorse.ports.store import Store

from tests.support.store import COMMIT, T0, seed_review

ACCEPTED = (
    CheckChange(
        check="lint", change="changed", before="sha256:" + "1" * 64, after="sha256:" + "2" * 64
    ),
    CheckChange(check="audit", change="removed", before="sha256:" + "3" * 64, after=None),
)
ON = ProjectPolicy(protect_checks=True)


def _project(project_id: str) -> Project:
    return Project(
        id=project_id,
        name=project_id,
        owner_id="o",
        created_at=T0,
        settings=ProjectSettings(require_receipt=True),
    )


def test_the_policy_is_off_by_default_and_changes_apart_from_the_settings(store: Store) -> None:
    assert store.create_project(_project("p1"))
    assert store.create_project(_project("p2"))
    fresh = store.get_project("p1")
    assert fresh is not None
    assert fresh.policy == DEFAULT_POLICY
    assert not fresh.protects_checks
    assert store.set_policy("p1", ON)
    assert store.set_settings("p1", ProjectSettings(require_receipt=False))
    changed = store.get_project("p1")
    assert changed is not None
    assert (changed.policy, changed.settings) == (ON, ProjectSettings(require_receipt=False))
    assert not changed.protects_checks, "advisory mode: the policy does not apply"
    assert store.set_settings("p1", ProjectSettings(require_receipt=True))
    again = store.get_project("p1")
    assert again is not None
    assert again.policy == ON
    assert again.protects_checks
    other = store.get_project("p2")
    assert other is not None
    assert other.policy == DEFAULT_POLICY
    assert [p.policy for p in store.list_projects()] == [ON, DEFAULT_POLICY]
    assert not store.set_policy("ghost", ON)
    assert store.get_project("ghost") is None


def test_consent_keeps_the_accepted_checks_change(store: Store) -> None:
    seed_review(store)
    approval = Approval(
        commit=COMMIT,
        owner_id="owner",
        approved_at=T0,
        generation=None,
        digest=None,
        require_receipt=True,
        accepted_checks_change=ACCEPTED,
    )
    assert store.approve("r1", approval, None, None, compare_receipt=False)
    review = store.get_review("r1")
    assert review is not None
    assert review.approval == approval
    assert review.approval.accepted_checks_change == ACCEPTED


def test_the_promotion_and_its_ledger_entry_keep_the_accepted_change(store: Store) -> None:
    seed_review(store)
    token = store.acquire_lease("proj", "holder", timedelta(minutes=1), T0)
    assert token is not None
    pending = Promotion(
        id="m1",
        project_id="proj",
        review_id="r1",
        commit=COMMIT,
        mode="required",
        started_at=T0,
        accepted_checks_change=ACCEPTED,
    )
    assert store.begin_promotion(pending, token, T0)
    begun = store.get_promotion("proj", "m1")
    assert begun is not None
    assert begun.accepted_checks_change == ACCEPTED
    entry = LedgerEntry(
        project_id="proj",
        promotion_id="m1",
        review_id="r1",
        commit=COMMIT,
        previous_head=None,
        digest="d" * 64,
        promoted_at=T0,
        accepted_checks_change=ACCEPTED,
    )
    assert store.settle_promotion("proj", "m1", "done", entry, T0)
    assert store.ledger("proj") == [entry]


def test_a_database_from_before_the_policy_reads_with_it_off(tmp_path: Path) -> None:
    """Rows written before these fields existed: the project's policy is off and consent,
    promotions and the ledger accepted no checks change."""
    state = tmp_path / "state"
    store = SqliteStore(state)
    seed_review(store)
    old_approval = {
        "commit": COMMIT,
        "owner_id": "owner",
        "approved_at": "2026-10-12T16:55:00Z",
        "generation": None,
        "digest": None,
        "require_receipt": True,
    }
    old_entry = {
        "project_id": "proj",
        "promotion_id": "m0",
        "review_id": "r1",
        "commit": COMMIT,
        "previous_head": None,
        "digest": None,
        "promoted_at": "2026-10-12T16:55:00Z",
    }
    with store._write() as conn:
        project = json.loads(conn.execute("SELECT data FROM projects").fetchone()[0])
        del project["policy"]
        conn.execute("UPDATE projects SET data = ?", (json.dumps(project),))
        review = json.loads(conn.execute("SELECT data FROM reviews").fetchone()[0])
        review["approval"] = old_approval
        conn.execute("UPDATE reviews SET data = ?", (json.dumps(review),))
        conn.execute(
            "INSERT INTO ledger (project_id, data) VALUES (?, ?)", ("proj", json.dumps(old_entry))
        )
    store.close()
    reopened = SqliteStore(state)
    try:
        project_read = reopened.get_project("proj")
        assert project_read is not None
        assert project_read.policy == DEFAULT_POLICY
        review_read = reopened.get_review("r1")
        assert review_read is not None
        assert review_read.approval is not None
        assert review_read.approval.accepted_checks_change == ()
        assert [e.accepted_checks_change for e in reopened.ledger("proj")] == [()]
        assert reopened.set_policy("proj", ON)
        assert (reopened.get_project("proj") or project_read).policy == ON
    finally:
        reopened.close()
