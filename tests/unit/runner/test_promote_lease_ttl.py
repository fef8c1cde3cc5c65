"""The promote lease's TTL: the checks' own time limits plus a margin, but never past the
longest a ReceiptRun execution can last (its state machine's timeout) plus that margin."""

from __future__ import annotations

from datetime import timedelta

from forkhorse.domain.checks import FullCheckDef, QuickCheckDef
from forkhorse.domain.limits import QUICK_SANDBOX, RECEIPT_RUN_TIMEOUT_SECONDS
from forkhorse.service.promote.steps import LEASE_MARGIN_SECONDS, lease_ttl


def _full(seconds: int) -> FullCheckDef:
    return FullCheckDef(name="full", image="busybox", run="true", timeout_seconds=seconds)


def test_the_ttl_covers_every_check_one_after_another_plus_the_margin() -> None:
    checks = [QuickCheckDef(name="quick", module="q.py"), _full(600), _full(900)]
    expected = QUICK_SANDBOX.deadline_seconds + 600 + 900 + LEASE_MARGIN_SECONDS
    assert lease_ttl(checks) == timedelta(seconds=expected)


def test_the_ttl_is_capped_at_the_receipt_runs_timeout_plus_the_margin() -> None:
    """Three hour-long checks would sum past the run's own timeout, which ends it first."""
    checks = [_full(3600), _full(3600), _full(3600)]
    cap = timedelta(seconds=RECEIPT_RUN_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS)
    assert lease_ttl(checks) == cap
    assert lease_ttl([_full(3600), _full(3600)]) == cap  # exactly at the bound


def test_no_checks_leave_only_the_margin() -> None:
    assert lease_ttl([]) == timedelta(seconds=LEASE_MARGIN_SECONDS)
