"""The bounded JSON parser of request bodies: every refusal is an InputRefused sentence,
never a RecursionError, an int-string ValueError or a lone surrogate let through."""

from __future__ import annotations

import json

import pytest
from forkhorse.domain.limits import ApiInputLimits
from forkhorse.domain.strict_json import (
    LONE_SURROGATE,
    NOT_FINITE,
    BodyTooLarge,
    InputRefused,
    check_value,
    parse_body,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.support.nesting import nested_arrays

SMALL = ApiInputLimits(body_bytes=1024, json_depth=4, json_number_chars=10)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"[[[[[]]]]]", "The body nests JSON deeper than the limit of 4 levels."),
        (
            b'{"a": {"b": {"c": {"d": {}}}}}',
            "The body nests JSON deeper than the limit of 4 levels.",
        ),
        (b"12345678901", "The body has a number longer than the limit of 10 characters."),
        (b"-1.23456e+10", "The body has a number longer than the limit of 10 characters."),
        (b"\xff", "The body is not valid UTF-8."),
        (
            b'"\\udc00"',
            "The body has a lone surrogate (an unpaired \\ud800-\\udfff escape) in a string.",
        ),
        (
            b'{"\\ud800": 1}',
            "The body has a lone surrogate (an unpaired \\ud800-\\udfff escape) in a string.",
        ),
        (
            b"[NaN]",
            "The body has a non-finite number (NaN or Infinity); JSON numbers must be finite.",
        ),
        (
            b"1e999",
            "The body has a non-finite number (NaN or Infinity); JSON numbers must be finite.",
        ),
        (b"{", "The body is not valid JSON."),
    ],
)
def test_each_problem_is_named(raw: bytes, error: str) -> None:
    with pytest.raises(InputRefused) as refused:
        parse_body(raw, SMALL)
    assert str(refused.value) == error


def test_a_body_past_the_byte_limit_is_too_large() -> None:
    with pytest.raises(BodyTooLarge, match="larger than the limit of 1024 bytes"):
        parse_body(b" " * 1025, SMALL)


def test_brackets_inside_strings_and_surrogate_pairs_are_fine() -> None:
    assert parse_body(b'{"a": "[[[[[[[[{{{{{{"}', SMALL) == {"a": "[[[[[[[[{{{{{{"}
    assert parse_body(b'["\\ud83d\\ude00", "\\\\ud800"]', SMALL) == ["\U0001f600", "\\ud800"]
    assert parse_body(b"[[[[1.5]]]]", SMALL) == [[[[1.5]]]]


def test_a_100000_deep_body_is_refused_without_recursion() -> None:
    with pytest.raises(InputRefused, match="deeper than the limit"):
        parse_body(b"[" * 100_000 + b"]" * 100_000)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**8), 10**8) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


def _outcome(raw: bytes) -> tuple[object, str | None]:
    try:
        return parse_body(raw, SMALL), None
    except InputRefused as refused:
        return None, str(refused)


@given(json_values)
def test_within_the_limits_it_parses_like_json(value: object) -> None:
    raw = json.dumps(value).encode()
    parsed, refusal = _outcome(raw)
    if refusal is None:
        assert parsed == json.loads(raw)
    else:
        assert "deeper" in refusal or "larger" in refusal


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_are_refused_with_a_sentence(raw: bytes) -> None:
    _, refusal = _outcome(raw)
    assert refusal is None or refusal.startswith("The ")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"x": float("nan")}, NOT_FINITE),
        ([float("-inf")], NOT_FINITE),
        ({"x": "\ud800"}, LONE_SURROGATE),
        ({"\udfff": 1}, LONE_SURROGATE),
        (nested_arrays(5), "The body nests JSON deeper than the limit of 4 levels."),
        (nested_arrays(5_000), "The body nests JSON deeper than the limit of 4 levels."),
        (10**11, "The body has a number longer than the limit of 10 characters."),
        (10**5000, "The body has a number longer than the limit of 10 characters."),
        ({"x": {1, 2}}, "The body is not valid JSON."),
    ],
    ids=["nan", "infinity", "surrogate", "surrogate-key", "deep", "deeper", "long", "huge", "set"],
)
def test_a_value_in_memory_is_refused_as_its_text_would_be(value: object, error: str) -> None:
    with pytest.raises(InputRefused) as refused:
        check_value(value, SMALL)
    assert str(refused.value) == error


def test_a_value_at_the_limits_passes() -> None:
    check_value([nested_arrays(3), "\U0001f600", 123456789, -1.5], SMALL)
