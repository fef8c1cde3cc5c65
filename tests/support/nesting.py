"""Deeply nested JSON values, for the depth bounds."""

from __future__ import annotations

from typing import Any


def nested_arrays(levels: int) -> Any:
    """A value `levels` arrays deep: `[]` is one level, `[[]]` two."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value
