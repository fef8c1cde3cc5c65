"""Builders for Store state, shared by store tests and anyone seeding a Store."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from forkhorse.domain.canonical import canonical_bytes, digest_of
from forkhorse.domain.logs import bound_log
from forkhorse.domain.model import (
    Fork,
    LedgerEntry,
    Packet,
    Principal,
    Project,
    ProjectSettings,
    Promotion,
    Review,
)
from forkhorse.domain.receipts import (
    CheckRecord,
    ReceiptRecord,
    ReceiptSummary,
    Trigger,
    format_timestamp,
    running_summary,
)
from forkhorse.ports.store import Store
from forkhorse.records import put_record

# Overwrites one stored chunk in place: (digest, index, chunk). Each backend provides one.
Tamper = Callable[[str, int, bytes], None]
T0 = datetime(2026, 10, 12, 16, 55, tzinfo=UTC)
CLAIM_TTL = timedelta(minutes=10)
COMMIT = "a" * 40


def seed_review(
    store: Store,
    review_id: str = "r1",
    *,
    agent_id: str = "agent-1",
    packet_id: str = "p1",
    generation: str | None = "g1",
    trigger: Trigger = "review-created",
    now: datetime = T0,
) -> Review:
    """A project, an agent with a live claim on a packet, and a review running `generation`."""
    store.create_principal(
        Principal(kind="agent", id=agent_id, name=agent_id, created_at=now), f"hash-{agent_id}"
    )
    store.create_project(
        Project(
            id="proj",
            name="Project",
            owner_id="owner",
            created_at=now,
            settings=ProjectSettings(require_receipt=True),
        )
    )
    store.create_packet(Packet(id=packet_id, project_id="proj", title="Work", created_at=now))
    store.create_fork(
        Fork(id="f1", project_id="proj", name="fork", owner_agent_id=agent_id, created_at=now)
    )
    assert store.claim_packet(packet_id, agent_id, CLAIM_TTL, now) is not None
    review = Review(
        id=review_id,
        project_id="proj",
        packet_id=packet_id,
        fork_id="f1",
        agent_id=agent_id,
        commit=COMMIT,
        created_at=now,
    )
    assert store.create_review(review)
    if generation is not None:
        assert store.start_execution(
            review_id, COMMIT, trigger, generation, running_summary(trigger, now)
        )
    return review


def check(index: int, *, log_bytes: int = 0) -> CheckRecord:
    quick = index % 2 == 0
    output = (f"line {index} ✓ ünïcode\n" * (log_bytes // 20 + 1)).encode()[:log_bytes]
    return CheckRecord(
        name=f"check-{index}",
        tier="quick" if quick else "full",
        definition={"name": f"check-{index}", "module": f".forkhorse/quick/c{index}.js"}
        if quick
        else {"name": f"check-{index}", "image": "default", "run": "npm test"},
        runtime="dynamic-worker" if quick else "container",
        platform="local-bwrap" if quick else "podman",
        image_digest=("module:sha256:" + "0" * 64) if quick else "sha256:" + "1" * 64,
        outcome="passed",
        message=f"Check {index} passed.",
        duration_ms=12,
        stdout=bound_log(output),
        stderr=bound_log(output),
    )


def record(
    *,
    generation: str = "g1",
    checks: int = 2,
    log_bytes: int = 0,
    trigger: Trigger = "review-created",
) -> ReceiptRecord:
    return ReceiptRecord(
        project="proj",
        review_id="r1",
        commit=COMMIT,
        tree="b" * 40,
        generation=generation,
        trigger=trigger,
        status="passed",
        evidence="mixed",
        platform="local",
        started_at=format_timestamp(T0),
        finished_at=format_timestamp(T0 + timedelta(seconds=3)),
        duration_ms=3000,
        checks=[check(i, log_bytes=log_bytes) for i in range(checks)],
    )


def final_summary(rec: ReceiptRecord, digest: str | None = None) -> ReceiptSummary:
    return rec.summary(digest)


def record_digest(rec: ReceiptRecord) -> str:
    return digest_of(canonical_bytes(rec.model_dump(mode="json")))


def crash_before_manifest(store: Store, rec: ReceiptRecord, now: datetime) -> str:
    """Put `rec` but fail between its chunks and its manifest: what a crashed put of a record
    too large for one transaction leaves (a smaller one is written in one, so `rec` is put
    as if it were that large), and what such a put still in flight looks like. Returns its
    digest."""

    def crash(*args: object) -> None:
        raise RuntimeError("power cut")

    with pytest.MonkeyPatch.context() as patch:
        beyond_one_transaction(store, patch)
        patch.setattr(store, "_write_manifest", crash)
        with pytest.raises(RuntimeError, match="power cut"):
            put_record(store, rec, now)
    return record_digest(rec)


def beyond_one_transaction(store: Store, patch: pytest.MonkeyPatch) -> None:
    """Make `store` put every record as it puts one too large for one transaction: an
    intent (DynamoDB), the chunks, then the manifest."""
    patch.setattr(store, "_fits_one_transaction", lambda chunks: False)


def promote_done(
    store: Store, project_id: str, review_id: str, promotion_id: str, commit: str, at: datetime
) -> LedgerEntry:
    """A promotion of `review_id` requested, begun under the lease and settled done, as the
    promote workflow leaves it; returns the ledger entry it wrote."""
    token = store.acquire_lease(project_id, "seed", timedelta(minutes=1), at)
    assert token is not None
    queued = Promotion(
        id=promotion_id,
        project_id=project_id,
        review_id=review_id,
        commit=commit,
        state="queued",
        mode="required",
        started_at=at,
        deadline=at + timedelta(minutes=16),
    )
    assert store.request_promotion(queued, at)
    assert store.begin_promotion(queued.model_copy(update={"state": "pending"}), token, at)
    entry = LedgerEntry(
        project_id=project_id,
        promotion_id=promotion_id,
        review_id=review_id,
        commit=commit,
        previous_head=None,
        digest="d" * 64,
        promoted_at=at,
    )
    assert store.settle_promotion(project_id, promotion_id, "done", entry, at)
    assert store.release_lease(project_id, "seed", token)
    return entry
