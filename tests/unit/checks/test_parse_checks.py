"""The strict `.forkhorse/checks` parser: every rule, accepted and refused."""

from __future__ import annotations

import hashlib
import json

import pytest
from forkhorse.domain.checks import (
    DEFAULT_FULL_TIMEOUT_SECONDS,
    FullCheckDef,
    InvalidChecksConfig,
    QuickCheckDef,
    parse_checks,
    quick_module_digest,
)
from hypothesis import given
from hypothesis import strategies as st

QUICK = {"name": "brand", "tier": "quick", "module": ".forkhorse/quick/brand.py"}
FULL = {"name": "large-files", "tier": "full", "image": "default", "run": "node scan.js"}


def parse_one(item: object) -> object:
    return parse_checks(json.dumps([item]))[0]


def test_a_quick_check_parses_to_its_definition() -> None:
    check = parse_one(QUICK)
    assert check == QuickCheckDef(name="brand", module=".forkhorse/quick/brand.py")
    assert isinstance(check, QuickCheckDef)
    assert check.definition() == QUICK


def test_a_javascript_quick_check_parses_and_names_its_runtime() -> None:
    item = {"name": "brand-quick", "tier": "quick", "module": ".forkhorse/quick/brand.js"}
    check = parse_one(item)
    assert isinstance(check, QuickCheckDef)
    assert check.definition() == item
    assert (check.language, parse_one(QUICK).language) == ("javascript", "python")


@pytest.mark.parametrize(
    ("file_name", "language"),
    [
        ("brand.v2.js", "javascript"),
        ("check.node.js", "javascript"),
        ("x.y.py", "python"),
        ("brand.js.js", "javascript"),
        (".hidden.py", "python"),
        ("my check (v2)=ok.js", "javascript"),
        ("caf\u00e9.py", "python"),
    ],
)
def test_any_safe_file_name_directly_under_the_quick_directory_is_a_module(
    file_name: str, language: str
) -> None:
    """The spec: one `.js` file immediately under `.forkhorse/quick/`; its name follows the
    snapshot's path rules, and the last extension picks the runtime."""
    item = {"name": "q", "tier": "quick", "module": ".forkhorse/quick/" + file_name}
    check = parse_one(item)
    assert isinstance(check, QuickCheckDef)
    assert check.definition() == item
    assert check.language == language


def test_a_full_check_gets_the_default_timeout() -> None:
    check = parse_one(FULL)
    assert isinstance(check, FullCheckDef)
    assert check.timeout_seconds == DEFAULT_FULL_TIMEOUT_SECONDS
    assert check.definition() == {**FULL, "timeoutSeconds": DEFAULT_FULL_TIMEOUT_SECONDS}


def test_a_full_check_with_a_timeout() -> None:
    check = parse_one({**FULL, "timeoutSeconds": 30})
    assert isinstance(check, FullCheckDef)
    assert check.timeout_seconds == 30


def test_order_is_preserved_and_tiers_mix() -> None:
    text = json.dumps([FULL, QUICK, {**QUICK, "name": "b2", "module": ".forkhorse/quick/b_2.py"}])
    assert [check.name for check in parse_checks(text)] == ["large-files", "brand", "b2"]


def test_the_repositorys_own_file_parses() -> None:
    with open(".forkhorse/checks", encoding="utf-8") as handle:
        checks = parse_checks(handle.read())
    assert checks[0] == QuickCheckDef(name="brand-quick", module=".forkhorse/quick/brand.js")
    assert [check.name for check in checks[1:]] == ["large-files", "brand"]


def test_exactly_64_checks_are_allowed() -> None:
    items = [{**QUICK, "name": f"c{index}"} for index in range(64)]
    assert len(parse_checks(json.dumps(items))) == 64


def test_the_module_digest_hashes_the_source_bytes() -> None:
    expected = hashlib.sha256("é\n".encode()).hexdigest()
    assert quick_module_digest("é\n") == f"module:sha256:{expected}"


INVALID = [
    # Document shape and strict JSON.
    ("not json", "not-json", ".forkhorse/checks is not valid JSON."),
    ("{}", "object", ".forkhorse/checks must be a JSON array of checks."),
    ('"x"', "string", ".forkhorse/checks must be a JSON array of checks."),
    ("null", "null", ".forkhorse/checks must be a JSON array of checks."),
    ("[]", "empty", ".forkhorse/checks must list at least one check."),
    ("[NaN]", "nan", ".forkhorse/checks is not strict JSON: NaN is not allowed."),
    ("[Infinity]", "infinity", ".forkhorse/checks is not strict JSON: Infinity is not allowed."),
    (
        '[{"name":"a","name":"b","tier":"quick","module":".forkhorse/quick/a.py"}]',
        "duplicate-key",
        '.forkhorse/checks repeats the JSON key "name".',
    ),
    (json.dumps([QUICK]) + " []", "trailing-data", ".forkhorse/checks is not valid JSON."),
    ("[" * 100_000 + "]" * 100_000, "deep-nesting", None),
    # Items.
    ("[1]", "item-number", ".forkhorse/checks: check 1 must be a JSON object."),
    ("[[]]", "item-array", ".forkhorse/checks: check 1 must be a JSON object."),
    ('[{"tier":"quick"}]', "no-name", '.forkhorse/checks: check 1 is missing the "name" field.'),
    ('[{"name":"","tier":"quick"}]', "empty-name", None),
    ('[{"name":7,"tier":"quick"}]', "number-name", None),
    ('[{"name":"a b","tier":"quick","module":".forkhorse/quick/a.py"}]', "space-in-name", None),
    ('[{"name":"-a","tier":"quick","module":".forkhorse/quick/a.py"}]', "leading-hyphen", None),
    (json.dumps([{**QUICK, "name": "n" * 65}]), "long-name", None),
    ('[{"name":"a"}]', "no-tier", '.forkhorse/checks: check 1 ("a") is missing the "tier" field.'),
    (
        '[{"name":"a","tier":"slow"}]',
        "unknown-tier",
        '.forkhorse/checks: check 1 ("a") has tier "slow"; it must be "quick" or "full".',
    ),
    # Quick checks.
    (
        json.dumps([{**QUICK, "image": "default"}]),
        "quick-with-image",
        '.forkhorse/checks: check 1 ("brand") has fields not allowed on a quick check: "image".',
    ),
    (json.dumps([{**QUICK, "run": "x"}]), "quick-with-run", None),
    (json.dumps([{**QUICK, "timeoutSeconds": 5}]), "quick-with-timeout", None),
    (json.dumps([{**QUICK, "extra": 1}]), "quick-unknown-field", None),
    (
        '[{"name":"a","tier":"quick"}]',
        "quick-no-module",
        '.forkhorse/checks: check 1 ("a") is missing required quick check fields: "module".',
    ),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/brand.mjs"}]), "module-mjs", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/brand.ts"}]), "module-ts", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/brand.js.py.txt"}]), "module-txt", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/brand.JS"}]), "module-upper-js", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/sub/brand.js"}]), "module-nested-js", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/sub/brand.py"}]), "module-nested", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/../brand.py"}]), "module-dotdot", None),
    (json.dumps([{**QUICK, "module": "/.forkhorse/quick/brand.py"}]), "module-absolute", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/brand.py"}]), "module-wrong-dir", None),
    (json.dumps([{**QUICK, "module": "brand.py"}]), "module-bare", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/.py"}]), "module-no-stem", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/..py"}]), "module-dot-stem", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/...js"}]), "module-dots-stem", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/.git"}]), "module-git", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/.git/a.js"}]), "module-git-dir", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick//a.js"}]), "module-empty-segment", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/./a.js"}]), "module-dot-segment", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/a\x7fb.js"}]), "module-del", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/a\u0085b.js"}]), "module-c1", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/a\u2028b.py"}]), "module-lsep", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/a.js/"}]), "module-trailing-slash", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/"}]), "module-dir-only", None),
    (json.dumps([{**QUICK, "module": "x/.forkhorse/quick/a.js"}]), "module-prefixed-dir", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/a\\b.py"}]), "module-backslash", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/a\nb.py"}]), "module-control", None),
    (json.dumps([{**QUICK, "module": ".forkhorse/quick/brand.py "}]), "module-space", None),
    (json.dumps([{**QUICK, "module": 5}]), "module-number", None),
    # Full checks.
    (
        json.dumps([{k: v for k, v in FULL.items() if k != "run"}]),
        "full-no-run",
        '.forkhorse/checks: check 1 ("large-files") is missing required full check fields: "run".',
    ),
    (json.dumps([{k: v for k, v in FULL.items() if k != "image"}]), "full-no-image", None),
    (json.dumps([{**FULL, "module": ".forkhorse/quick/a.py"}]), "full-with-module", None),
    (json.dumps([{**FULL, "image": "Default"}]), "image-uppercase", None),
    (json.dumps([{**FULL, "image": "registry/x@sha256:" + "0" * 64}]), "image-reference", None),
    (json.dumps([{**FULL, "image": ""}]), "image-empty", None),
    (json.dumps([{**FULL, "run": ""}]), "run-empty", None),
    (json.dumps([{**FULL, "run": "   "}]), "run-blank", None),
    (json.dumps([{**FULL, "run": ["npm", "test"]}]), "run-list", None),
    (json.dumps([{**FULL, "run": "a\x00b"}]), "run-nul", None),
    (json.dumps([{**FULL, "run": "x" * 4097}]), "run-long", None),
    (json.dumps([{**FULL, "timeoutSeconds": 0}]), "timeout-zero", None),
    (json.dumps([{**FULL, "timeoutSeconds": 3601}]), "timeout-too-long", None),
    (json.dumps([{**FULL, "timeoutSeconds": 1.5}]), "timeout-float", None),
    (json.dumps([{**FULL, "timeoutSeconds": True}]), "timeout-bool", None),
    (json.dumps([{**FULL, "timeoutSeconds": "60"}]), "timeout-string", None),
    # The suite.
    (
        json.dumps([QUICK, {**FULL, "name": "brand"}]),
        "duplicate-name",
        '.forkhorse/checks names the check "brand" twice.',
    ),
    (
        json.dumps([{**QUICK, "name": f"c{index}"} for index in range(65)]),
        "65-checks",
        ".forkhorse/checks lists 65 checks; at most 64 are allowed.",
    ),
    (
        json.dumps([{**FULL, "run": "x" * 4000, "name": f"c{index}"} for index in range(17)]),
        "oversized-file",
        ".forkhorse/checks is larger than 65536 bytes.",
    ),
]


@pytest.mark.parametrize(
    ("text", "message"),
    [(text, message) for text, _, message in INVALID],
    ids=[i for _, i, _ in INVALID],
)
def test_invalid_configuration_is_refused_precisely(text: str, message: str | None) -> None:
    with pytest.raises(InvalidChecksConfig) as raised:
        parse_checks(text)
    assert raised.value.message == str(raised.value)
    assert raised.value.message.startswith(".forkhorse/checks")
    if message is not None:
        assert raised.value.message == message


def test_limits_on_the_boundary_are_accepted() -> None:
    assert parse_one({**FULL, "timeoutSeconds": 1})
    assert parse_one({**FULL, "timeoutSeconds": 3600})
    assert parse_one({**FULL, "run": "x" * 4096})
    assert parse_one({**QUICK, "name": "n" * 64})


def test_messages_escape_hostile_values() -> None:
    with pytest.raises(InvalidChecksConfig) as raised:
        parse_checks(json.dumps([{**QUICK, "module": "\u202e\x1b[31m" + "x" * 500}]))
    assert "\x1b" not in raised.value.message
    assert "\u202e" not in raised.value.message
    assert len(raised.value.message) < 400


@given(st.text(max_size=300))
def test_arbitrary_text_either_parses_or_is_refused_cleanly(text: str) -> None:
    try:
        checks = parse_checks(text)
    except InvalidChecksConfig:
        return
    assert 1 <= len(checks) <= 64
