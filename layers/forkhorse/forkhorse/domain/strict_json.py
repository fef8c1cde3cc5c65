"""A bounded JSON parser for request bodies: size, UTF-8, depth and numbers are checked
while parsing, so no body can raise RecursionError, hit Python's int-string limit or
smuggle a lone surrogate or a non-finite number into the service. `check_value` holds a
value already in memory to the same rules, and stored JSON is read back through the parser.

Every refusal is an `InputRefused` whose message is one sentence naming the problem.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from forkhorse.domain.limits import API_INPUT, ApiInputLimits

NOT_JSON = "The body is not valid JSON."
NOT_UTF8 = "The body is not valid UTF-8."
LONE_SURROGATE = "The body has a lone surrogate (an unpaired \\ud800-\\udfff escape) in a string."
NOT_FINITE = "The body has a non-finite number (NaN or Infinity); JSON numbers must be finite."

# A whole JSON string, escapes included (the unrolled form never backtracks per char).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
# Strict UTF-8 decoding refuses encoded surrogates, so only an escape can make one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


class InputRefused(ValueError):
    """The body breaks a rule of the input at the edge (a 400)."""


class BodyTooLarge(InputRefused):
    """The body is larger than the byte limit (a 413)."""


def too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"The request body is larger than the limit of {limit} bytes.")


def parse_body(raw: bytes, limits: ApiInputLimits = API_INPUT) -> Any:
    """The JSON value of a request body, or InputRefused naming the first problem."""
    if len(raw) > limits.body_bytes:
        raise too_large(limits.body_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputRefused(NOT_UTF8) from None
    return parse_text(text, limits)


def parse_text(text: str, limits: ApiInputLimits = API_INPUT) -> Any:
    _check_depth(text, limits.json_depth)
    numbers = _Numbers(limits.json_number_chars)
    try:
        value = json.loads(
            text,
            parse_int=numbers.integer,
            parse_float=numbers.real,
            parse_constant=numbers.constant,
        )
    except json.JSONDecodeError:
        raise InputRefused(NOT_JSON) from None
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(value)
    return value


def check_value(value: Any, limits: ApiInputLimits = API_INPUT) -> None:
    """Refuse a value built in memory exactly as its JSON text would be refused as a body
    (the size aside): too deep, an over-long number, a non-finite float, a lone surrogate."""
    try:
        # ASCII escapes and NaN literals keep both visible to the parser's own checks.
        text = json.dumps(value, allow_nan=True)
    except RecursionError:
        raise InputRefused(_too_deep(limits.json_depth)) from None
    except ValueError:  # an int past Python's int-string conversion limit
        raise InputRefused(_too_long(limits.json_number_chars)) from None
    except TypeError:
        raise InputRefused(NOT_JSON) from None
    parse_text(text, limits)


def _too_deep(limit: int) -> str:
    return f"The body nests JSON deeper than the limit of {limit} levels."


def _too_long(limit: int) -> str:
    return f"The body has a number longer than the limit of {limit} characters."


def _check_depth(text: str, limit: int) -> None:
    """Refuse nesting past `limit` before the recursive parser sees it. Brackets inside
    strings do not count; an unterminated string only makes the count stricter."""
    if text.count("[") + text.count("{") <= limit:
        return
    brackets = _NOT_BRACKET.sub("", _STRING.sub('""', text))
    depth = 0
    for bracket in brackets:
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            raise InputRefused(_too_deep(limit))


class _Numbers:
    """parse_int/parse_float/parse_constant hooks: each literal is bounded before Python
    converts it, and only finite numbers come out."""

    def __init__(self, limit: int) -> None:
        self._limit = limit

    def integer(self, literal: str) -> int:
        return int(self._bounded(literal))

    def real(self, literal: str) -> float:
        value = float(self._bounded(literal))
        if not math.isfinite(value):  # 1e999 overflows to inf
            raise InputRefused(NOT_FINITE)
        return value

    @staticmethod
    def constant(_: str) -> float:
        raise InputRefused(NOT_FINITE)  # NaN, Infinity, -Infinity

    def _bounded(self, literal: str) -> str:
        if len(literal) > self._limit:
            raise InputRefused(_too_long(self._limit))
        return literal


def _check_strings(value: Any) -> None:
    """Every key and string must encode as UTF-8 (a lone surrogate cannot). The depth is
    already bounded, so the recursion is too."""
    if isinstance(value, str):
        _check_string(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_string(key)
            _check_strings(item)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)


def _check_string(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputRefused(LONE_SURROGATE) from None
