"""Shared primitives for rule checks: the violation type, JSON pointers and strict scalar tests.

Every check names the rule it enforces and the JSON pointer (RFC 6901) of the offending value,
so a rejected receipt can be explained precisely. Nothing here coerces: a boolean is never an
integer, a float is never an integer, and a missing key is never a default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# R-IDs are `R<digits>` as written (`R0` and `R01` included, as reference receipts keep them);
# G-IDs are a positive decimal without zero padding (the reference rejects G0 and G01). Digits
# are ASCII: Python's `\d` would also take other scripts' digits.
R_ID_PATTERN = re.compile(r"R[0-9]+")
G_ID_PATTERN = re.compile(r"G[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class RuleViolation(Exception):
    """A named rule failed at `pointer`; `message` says how, for humans."""

    rule: str
    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.pointer or '/'}: {self.message}"


Where = tuple[str | int, ...]  # JSON pointer segments, rendered only when a rule fails


def fail(rule: str, where: Where, message: str) -> RuleViolation:
    return RuleViolation(rule, pointer(*where), message)


def pointer(*parts: str | int) -> str:
    """Build a JSON pointer from path segments, escaping `~` and `/` as RFC 6901 requires."""
    escaped = (str(part).replace("~", "~0").replace("/", "~1") for part in parts)
    return "".join("/" + segment for segment in escaped)


def child(base: Where, *parts: str | int) -> Where:
    return (*base, *parts)


def is_int(value: object) -> bool:
    """A JSON integer: Python `int` but never `bool` (which subclasses it)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_positive_int(value: object) -> bool:
    return is_int(value) and value > 0  # type: ignore[operator]


def require_mapping(value: object, rule: str, where: Where) -> Mapping[str, Any]:
    if not isinstance(value, dict) and not isinstance(value, Mapping):  # dict first: hot path
        raise fail(rule, where, "must be a JSON object")
    return value


def require_list(value: object, rule: str, where: Where) -> list[Any]:
    if not isinstance(value, list):
        raise fail(rule, where, "must be a JSON array")
    return value


def check_closed_keys(
    obj: Mapping[str, Any],
    *,
    required: frozenset[str],
    optional: frozenset[str],
    rule_prefix: str,
    where: Where,
) -> None:
    """Unknown keys are never a compatible extension; missing required keys are never defaulted."""
    keys = obj.keys()
    allowed = required | optional
    if keys <= allowed and required <= keys:
        return
    for key in obj:
        if key not in allowed:
            raise fail(f"{rule_prefix}.closed-keys", child(where, str(key)), "unknown field")
    for key in sorted(required):
        if key not in obj:
            raise fail(f"{rule_prefix}.required", child(where, key), "required field missing")


def check_string(
    value: object, *, rule: str, where: Where, max_chars: int, allow_empty: bool = False
) -> str:
    """A JSON string of at most `max_chars` characters (code points), never empty unless allowed."""
    if not isinstance(value, str):
        raise fail(rule, where, "must be a string")
    if not value and not allow_empty:
        raise fail(rule, where, "must not be empty")
    if len(value) > max_chars:
        raise fail(rule, where, f"longer than {max_chars} characters")
    return value


def check_enum(value: object, allowed: tuple[str, ...], *, rule: str, where: Where) -> str:
    """Canonical values only: aliases and case variants are rejected, never coerced."""
    if not isinstance(value, str) or value not in allowed:
        raise fail(rule, where, f"must be one of {', '.join(allowed)}")
    return value


def canonical_json(value: object) -> bytes:
    """Key-sorted compact JSON: equal bytes mean equal JSON (`true` and `1` stay distinct)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
