"""The committed `openapi.json`: it is what the code generates, every response body has a
real schema, and the breaking-change diff (scripts/openapi/diff.py) finds what breaks old
clients and nothing else."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from forkhorse.api.guards import PUBLIC_PATHS

from scripts.openapi.__main__ import COMMITTED, generated
from scripts.openapi.diff import breaking_changes


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    current = generated()
    assert COMMITTED.read_text(encoding="utf-8") == current, "run `make openapi`"
    parsed: dict[str, Any] = json.loads(current)
    return parsed


def _responses(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (f"{method} {path}", status, answer)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for status, answer in operation["responses"].items()
    ]


def test_every_answer_has_a_named_schema(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for where, status, answer in _responses(document):
        schema = answer["content"]["application/json"]["schema"]
        assert "$ref" in schema, (where, status, schema)
        name = schema["$ref"].rsplit("/", 1)[1]
        expected = "ErrorBody" if int(status) >= 400 else name
        assert name == expected, (where, status)
        assert schemas[name]["properties"], name


def test_the_error_body_is_one_sentence(document: dict[str, Any]) -> None:
    error = document["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["error"]
    assert error["properties"]["error"]["type"] == "string"


def test_no_change_breaks_nothing(document: dict[str, Any]) -> None:
    assert breaking_changes(document, copy.deepcopy(document)) == []


def test_additions_do_not_break(document: dict[str, Any]) -> None:
    new = copy.deepcopy(document)
    view = new["components"]["schemas"]["ProjectView"]
    view["properties"]["extra"] = {"type": "string"}
    new["paths"]["/extra"] = {"get": {"responses": {}}}
    assert breaking_changes(document, new) == []


def test_removed_operations_statuses_and_fields_break(document: dict[str, Any]) -> None:
    new = copy.deepcopy(document)
    del new["paths"]["/agents"]["post"]
    del new["paths"]["/projects"]["get"]["responses"]["409"]
    del new["components"]["schemas"]["ProjectView"]["properties"]["cloneUrl"]
    changes = breaking_changes(document, new)
    assert "POST /agents: the operation was removed." in changes
    assert "GET /projects: response 409 was removed." in changes
    assert "POST /projects 201.project: property cloneUrl was removed." in changes


def test_changed_types_and_values_break(document: dict[str, Any]) -> None:
    new = copy.deepcopy(document)
    schemas = new["components"]["schemas"]
    schemas["ProjectView"]["properties"]["name"] = {"type": "integer"}
    schemas["ApprovalView"]["properties"]["mode"]["enum"] = ["required"]
    changes = breaking_changes(document, new)
    assert "POST /projects 201.project.name: the type changed from ['string'] to ['integer']." in (
        changes
    )
    assert any(change.endswith(".approval.mode: the allowed values changed.") for change in changes)


def test_a_newly_required_request_field_breaks(document: dict[str, Any]) -> None:
    new = copy.deepcopy(document)
    create = new["components"]["schemas"]["CreateProject"]
    create["properties"]["team"] = {"type": "string"}
    create["required"] = [*create.get("required", []), "team"]
    assert "POST /projects request: property team is newly required." in breaking_changes(
        document, new
    )


def test_a_response_field_no_longer_promised_breaks(document: dict[str, Any]) -> None:
    new = copy.deepcopy(document)
    new["components"]["schemas"]["ProjectBody"]["required"] = []
    changes = breaking_changes(document, new)
    assert "POST /projects 201: property project is no longer always present." in changes


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def test_the_bearer_scheme_is_declared(document: dict[str, Any]) -> None:
    schemes = document["components"]["securitySchemes"]
    assert {name: (s["type"], s["scheme"]) for name, s in schemes.items()} == {
        "bearer": ("http", "bearer")
    }
    assert "security" not in document  # each operation says its own


def test_every_operation_has_a_short_id_a_summary_a_tag_and_its_security(
    document: dict[str, Any],
) -> None:
    """What generated clients name their calls after, how Swagger UI groups them, and the
    token they send: on every operation but the public ones."""
    tags = [tag["name"] for tag in document["tags"]]
    ids = []
    for path, method, operation in _operations(document):
        where = f"{method.upper()} {path}"
        ids.append(operation["operationId"])
        assert re.fullmatch(r"[a-z][A-Za-z]{2,30}", operation["operationId"]), where
        summary = operation["summary"]
        assert "\n" not in summary, where
        assert 0 < len(summary) <= 80, where
        assert summary != where, where
        assert len(operation["tags"]) == 1, where
        assert operation["tags"][0] in tags, where
        if path in PUBLIC_PATHS:
            assert "security" not in operation, where
        else:
            assert operation["security"] == [{"bearer": []}], where
    assert len(ids) == len(set(ids))
    assert {"requestReview", "getState", "promoteReview", "claimPacket", "listKeys"} <= set(ids)
