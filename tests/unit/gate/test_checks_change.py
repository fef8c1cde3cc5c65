"""The protected-checks comparison: canonical head's checks against a reviewed commit's."""

from __future__ import annotations

import json

from forkhorse.domain.checks import MAX_CHECKS, MAX_NAME_LENGTH, parse_checks
from forkhorse.domain.checks_change import (
    UNREADABLE_MODULE,
    DeclaredCheck,
    declared_checks,
    diff_checks,
    unaccepted_reasons,
)
from forkhorse.domain.gate import Definitions, reason_code

LINT = '{"name":"lint","tier":"quick","module":".forkhorse/quick/lint.py"}'
TEST = '{"name":"test","tier":"full","image":"default","run":"npm test"}'
LINT_SOURCE = "def check(ctx):\n    return {'ok': ctx.read('src') is not None}\n"
ALWAYS_PASSES = "def check(ctx):\n    return {'ok': True}\n"


def _declared(
    *checks: str, sources: dict[str, str | None] | None = None
) -> dict[str, DeclaredCheck]:
    definitions = Definitions(checks=parse_checks("[" + ",".join(checks) + "]"))
    if sources is None:
        sources = {".forkhorse/quick/lint.py": LINT_SOURCE}
    return declared_checks(definitions, sources)


CANONICAL = _declared(LINT, TEST)


def _kinds(base: dict[str, DeclaredCheck], head: dict[str, DeclaredCheck]) -> list[tuple[str, str]]:
    return [(c.check, c.change) for c in diff_checks(base, head).changes]


def test_identical_checks_differ_in_nothing() -> None:
    diff = diff_checks(CANONICAL, _declared(LINT, TEST))
    assert diff.changes == ()
    assert diff.reasons() == []


def test_a_removed_check_is_a_checks_changed_reason() -> None:
    diff = diff_checks(CANONICAL, _declared(TEST))
    assert _kinds(CANONICAL, _declared(TEST)) == [("lint", "removed")]
    assert diff.reasons() == ["checks-changed: Check lint was removed."]
    assert diff.protected[0].before == CANONICAL["lint"].fingerprint
    assert diff.protected[0].after is None


def test_a_changed_declaration_is_a_reason() -> None:
    quicker = TEST.replace("npm test", "true")
    diff = diff_checks(CANONICAL, _declared(LINT, quicker))
    assert [(c.check, c.change) for c in diff.changes] == [("test", "changed")]
    assert diff.reasons() == ["checks-changed: Check test's declaration changed."]


def test_the_same_declaration_with_other_module_bytes_is_a_reason() -> None:
    """The attack: keep the check's name and declaration, make its module always pass."""
    head = _declared(LINT, TEST, sources={".forkhorse/quick/lint.py": ALWAYS_PASSES})
    diff = diff_checks(CANONICAL, head)
    assert [(c.check, c.change) for c in diff.changes] == [("lint", "changed")]
    assert diff.reasons() == ["checks-changed: Check lint's module changed."]
    change = diff.protected[0]
    assert (change.before, change.after) == (
        CANONICAL["lint"].fingerprint,
        head["lint"].fingerprint,
    )


def test_an_unreadable_module_counts_as_changed() -> None:
    head = _declared(LINT, TEST, sources={".forkhorse/quick/lint.py": None})
    assert head["lint"].module_digest == UNREADABLE_MODULE
    assert _kinds(CANONICAL, head) == [("lint", "changed")]


def test_a_renamed_check_is_removed_plus_added_and_only_the_removal_is_protected() -> None:
    renamed = LINT.replace('"lint"', '"style"')
    diff = diff_checks(CANONICAL, _declared(renamed, TEST))
    assert [(c.check, c.change) for c in diff.changes] == [("lint", "removed"), ("style", "added")]
    assert [c.check for c in diff.protected] == ["lint"]
    assert diff.reasons() == ["checks-changed: Check lint was removed."]


def test_an_added_check_is_shown_but_is_no_reason() -> None:
    extra = '{"name":"audit","tier":"full","image":"default","run":"npm audit"}'
    diff = diff_checks(CANONICAL, _declared(LINT, TEST, extra))
    assert [(c.check, c.change) for c in diff.changes] == [("audit", "added")]
    assert diff.protected == ()
    assert diff.reasons() == []
    shown = diff.to_json()
    assert shown[0]["protected"] is False
    assert shown[0]["before"] is None
    assert shown[0]["after"]["definition"]["run"] == "npm audit"


def test_without_a_canonical_head_nothing_is_protected() -> None:
    diff = diff_checks({}, _declared(LINT))
    assert [(c.check, c.change) for c in diff.changes] == [("lint", "added")]
    assert diff.reasons() == []


def test_absent_or_invalid_checks_declare_nothing() -> None:
    assert declared_checks(Definitions(absent=True), {}) == {}
    assert declared_checks(Definitions(error="not JSON"), {}) == {}
    diff = diff_checks(CANONICAL, declared_checks(Definitions(absent=True), {}))
    assert [c.change for c in diff.changes] == ["removed", "removed"]
    assert {reason_code(r) for r in diff.reasons()} == {"checks-changed"}


def test_acceptance_covers_exactly_the_change_it_was_given_for() -> None:
    head = _declared(LINT, TEST, sources={".forkhorse/quick/lint.py": ALWAYS_PASSES})
    diff = diff_checks(CANONICAL, head)
    assert unaccepted_reasons(diff, diff.protected) == []
    assert unaccepted_reasons(diff, ()) == diff.reasons()
    # Canonical's lint moved since the acceptance: the same names, another diff.
    moved = _declared(LINT, TEST, sources={".forkhorse/quick/lint.py": LINT_SOURCE + "# v2\n"})
    later = diff_checks(moved, head)
    reasons = unaccepted_reasons(later, diff.protected)
    assert reasons[0].startswith("checks-changed: The accepted checks change differs")
    assert reasons[1:] == later.reasons()
    # Nothing protected any more (canonical took the change): no acceptance is needed.
    assert unaccepted_reasons(diff_checks(head, head), diff.protected) == []


def test_the_stored_acceptance_is_bounded_by_the_checks_limit() -> None:
    """The most a consent can carry: every one of canonical's MAX_CHECKS checks changed, each
    entry two fixed-size fingerprints whatever the declarations hold. It stays far below
    DynamoDB's 400 KB item, where it shares the review's item."""
    names = [f"{'c' * 61}{index:03d}" for index in range(MAX_CHECKS)]
    full = '{{"name":"{}","tier":"full","image":"default","run":"{}"}}'
    base = _declared(*(full.format(name, "x" * 800) for name in names))
    head = _declared(*(full.format(name, "y") for name in names))
    protected = diff_checks(base, head).protected
    assert len(protected) == MAX_CHECKS
    assert {len(change.check) for change in protected} == {MAX_NAME_LENGTH}
    stored = json.dumps([change.model_dump(mode="json") for change in protected])
    assert len(stored.encode()) <= 20 * 1024  # measured: 17,216 bytes
