"""Strict wire models: camelCase on the wire, nothing unknown, no coercion."""

from pydantic import BaseModel, ConfigDict
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
    """`Field(default=None, exclude_if=is_none)`: an optional field absent from the wire
    unless set, so a model dumps exactly the keys its producer sent."""
    return value is None


class WireModel(BaseModel):
    """A step contract or wire body on `WIRE_CONFIG`."""

    model_config = WIRE_CONFIG
