"""The promotion's VSA: signed once canonical moved (the promote-write step, or settle for
a write that landed unattested)."""

from __future__ import annotations

import logging

from forkhorse import records
from forkhorse.attest.statements import PromotionFacts, is_mocked
from forkhorse.domain.canonical import RecordCorruptedError
from forkhorse.domain.model import Promotion
from forkhorse.domain.receipts import format_timestamp
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service.attestations import receipt_attestation_path
from forkhorse.service.context import Context
from forkhorse.service.errors import Conflict
from forkhorse.service.log_events import approval_entry

log = logging.getLogger(__name__)


def attest_promotion(context: Context, promotion: Promotion) -> None:
    """Sign the VSA of a done promotion (the promote-write step; once per promotion).
    Canonical has moved by then, so a function without the key logs it rather than fail
    the workflow (the template names the key to write and settle; a test checks)."""
    attestor = context.attestor
    if attestor is None or promotion.state != "done":
        return
    if attestor.signer is None:
        log.error("promotion %s is done but unattested: no signing key here", promotion.id)
        return
    facts, now = promotion_facts(context, promotion), context.clock.now()
    attestor.attest_promotion(facts, now, context.gate_log.intending_promotion(promotion))
    log_promotion(context, promotion)


def log_promotion(context: Context, promotion: Promotion) -> None:
    """The promotion's entry, after its approval's and receipt's (appended again if a crash
    lost them: each append is idempotent), so the log shows consent and evidence first."""
    gate = context.gate_log
    review = context.store.get_review(promotion.review_id)
    approval = None if review is None else review.approval
    if approval is not None and approval.commit == promotion.commit:
        gate.append(approval_entry(promotion.project_id, promotion.review_id, approval))
    if promotion.digest is not None:
        record = records.get_record(context.store, promotion.digest)
        if record is not None:
            gate.receipt(record, promotion.digest)
    gate.promotion(promotion)


def promotion_facts(context: Context, promotion: Promotion) -> PromotionFacts:
    base = context.settings.public_url
    digest = promotion.digest
    record = None
    if digest is not None:
        try:
            record = records.get_record(context.store, digest)
        except RecordCorruptedError as corrupted:
            raise Conflict("The promoted record does not match its digest.") from corrupted
    attestor = context.attestor
    payload = None
    if digest is not None and attestor is not None:
        payload = attestor.receipt_payload_digest(digest)
    path = receipt_attestation_path(promotion.project_id, promotion.review_id)
    return PromotionFacts(
        project=promotion.project_id,
        promotion_id=promotion.id,
        review_id=promotion.review_id,
        commit=promotion.commit,
        mode=promotion.mode or "advisory",
        time_verified=format_timestamp(promotion.settled_at or context.clock.now()),
        resource_uri=f"git+{base}/git/{promotion.project_id}/canonical.git@{DEFAULT_BRANCH}",
        record_digest=digest,
        record_passed=record is not None and record.status == "passed",
        record_mocked=record is not None and is_mocked(record),
        receipt_uri=None if payload is None else base + path,
        receipt_payload_digest=payload,
    )
