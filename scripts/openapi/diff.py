"""Breaking changes between two OpenAPI 3.1 documents, structurally.

A client of the old document breaks when an operation or a response status it relied on
goes away, when a response body loses a property, stops promising one, or changes a
type or an enum; and when a request needs a property it did not, or refuses one it took.
Additions that old clients can ignore (new paths, new optional request fields, new
response fields) are not breaking. `$ref`s are followed within each document.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

Json = Mapping[str, Any]
Direction = Literal["request", "response"]
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_MAX_DEPTH = 32  # schemas nest far less; recursive ones stop here


def breaking_changes(old: Json, new: Json) -> list[str]:
    """Each breaking change from `old` to `new`, one sentence each, in path order."""
    return list(_paths(old, new))


def _paths(old: Json, new: Json) -> Iterator[str]:
    new_paths = new.get("paths", {})
    for path, old_item in old.get("paths", {}).items():
        for method in METHODS:
            if method not in old_item:
                continue
            where = f"{method.upper()} {path}"
            new_op = new_paths.get(path, {}).get(method)
            if new_op is None:
                yield f"{where}: the operation was removed."
                continue
            yield from _operation(where, Schemas(old, old_item[method]), Schemas(new, new_op))


class Schemas:
    """One operation and the document its `$ref`s point into."""

    def __init__(self, document: Json, operation: Json) -> None:
        self.document = document
        self.operation = operation

    def resolve(self, schema: Json) -> Json:
        seen = 0
        while "$ref" in schema and seen < _MAX_DEPTH:
            node: Any = self.document
            for part in schema["$ref"].removeprefix("#/").split("/"):
                node = node.get(part, {}) if isinstance(node, Mapping) else {}
            schema, seen = node, seen + 1
        return schema


def _body_schema(holder: Json | None) -> Json | None:
    if holder is None:
        return None
    content = holder.get("content", {}).get("application/json")
    return None if content is None else content.get("schema", {})


def _operation(where: str, old: Schemas, new: Schemas) -> Iterator[str]:
    old_request = _body_schema(old.operation.get("requestBody"))
    new_request = _body_schema(new.operation.get("requestBody"))
    if old_request is not None and new_request is not None:
        yield from _schema(f"{where} request", old_request, new_request, old, new, "request")
    new_responses = new.operation.get("responses", {})
    for status, old_response in old.operation.get("responses", {}).items():
        new_response = new_responses.get(status)
        if new_response is None:
            yield f"{where}: response {status} was removed."
            continue
        old_body, new_body = _body_schema(old_response), _body_schema(new_response)
        if old_body is not None and new_body is None:
            yield f"{where} {status}: the body was removed."
        elif old_body is not None and new_body is not None:
            yield from _schema(f"{where} {status}", old_body, new_body, old, new, "response")


def _schema(
    where: str,
    old_schema: Json,
    new_schema: Json,
    old: Schemas,
    new: Schemas,
    direction: Direction,
    depth: int = 0,
) -> Iterator[str]:
    if depth > _MAX_DEPTH:
        return
    before, after = old.resolve(old_schema), new.resolve(new_schema)
    if _kinds(before, old) != _kinds(after, new):
        yield f"{where}: the type changed from {_kinds(before, old)} to {_kinds(after, new)}."
        return
    if before.get("enum") != after.get("enum") or before.get("const") != after.get("const"):
        yield f"{where}: the allowed values changed."
    yield from _properties(where, before, after, old, new, direction, depth)
    old_items, new_items = before.get("items"), after.get("items")
    if isinstance(old_items, Mapping) and isinstance(new_items, Mapping):
        yield from _schema(f"{where}[]", old_items, new_items, old, new, direction, depth + 1)


def _properties(
    where: str,
    before: Json,
    after: Json,
    old: Schemas,
    new: Schemas,
    direction: Direction,
    depth: int,
) -> Iterator[str]:
    old_props, new_props = before.get("properties", {}), after.get("properties", {})
    old_required, new_required = set(before.get("required", ())), set(after.get("required", ()))
    for name, old_prop in old_props.items():
        if name not in new_props:
            yield f"{where}: property {name} was removed."
            continue
        if direction == "response" and name in old_required and name not in new_required:
            yield f"{where}: property {name} is no longer always present."
        yield from _schema(
            f"{where}.{name}", old_prop, new_props[name], old, new, direction, depth + 1
        )
    if direction == "request":
        for name in sorted(new_required - old_required):
            yield f"{where}: property {name} is newly required."


def _kinds(schema: Json, schemas: Schemas) -> list[str]:
    """The JSON types a schema allows, through `anyOf`/`oneOf` (`any` when open)."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            kinds = {k for option in schema[key] for k in _kinds(schemas.resolve(option), schemas)}
            return sorted(kinds)
    kind = schema.get("type")
    if kind is None:
        return ["object"] if "properties" in schema else ["any"]
    return sorted(kind) if isinstance(kind, list) else [kind]
