"""Refusals carry a kind, not an HTTP status: the API maps every kind to its status, and a
refusal stored by an earlier version (with the status it was answered with) still reads."""

from __future__ import annotations

from typing import get_args

import pytest
from forkhorse.api.routes.answers import ERROR_STATUSES, STATUS_OF
from forkhorse.domain.model import Refusal, RefusalKind
from pydantic import ValidationError


def test_every_kind_has_one_status_and_the_document_lists_it() -> None:
    assert set(STATUS_OF) == set(get_args(RefusalKind))
    assert sorted(ERROR_STATUSES) == sorted(set(STATUS_OF.values()))


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid"), (403, "forbidden"), (404, "not-found"), (409, "conflict")],
)
def test_a_stored_refusal_with_a_status_reads_as_its_kind(status: int, kind: str) -> None:
    stored = f'{{"status": {status}, "error": "No.", "reasons": ["consent-missing"]}}'
    refusal = Refusal.model_validate_json(stored)
    assert (refusal.kind, refusal.error, refusal.reasons) == (kind, "No.", ("consent-missing",))
    assert STATUS_OF[refusal.kind] == status
    assert '"status"' not in refusal.model_dump_json()


def test_a_refusal_round_trips_by_kind() -> None:
    refusal = Refusal(kind="not-found", error="Review not found.")
    assert Refusal.model_validate_json(refusal.model_dump_json()) == refusal


def test_an_unknown_stored_status_is_refused_not_guessed() -> None:
    with pytest.raises(ValidationError, match="a refusal's status must be one of"):
        Refusal.model_validate({"status": 500, "error": "boom"})
