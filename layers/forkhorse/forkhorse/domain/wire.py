"""Strict wire models: camelCase on the wire, nothing unknown, no coercion."""

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

WIRE_CONFIG = ConfigDict(
    frozen=True,
    extra="forbid",
    strict=True,
    alias_generator=to_camel,
    populate_by_name=True,
    serialize_by_alias=True,
)


def is_none(value: object) -> bool:
    """For `Field(exclude_if=is_none)`: an optional field absent from the wire when unset."""
    return value is None
