"""The served `/openapi.json` is valid OpenAPI 3.1 and links each create to what follows."""

from __future__ import annotations

from typing import Any

import schemathesis
from jsonschema_path import SchemaPath
from openapi_spec_validator import validate

from tests.support.live import Server

STATE = "#/paths/~1projects~1{project_id}~1state/get"
REVIEW = "#/paths/~1projects~1{project_id}~1reviews~1{review_id}"


def _document(server: Server) -> dict[str, Any]:
    return server.client(None).ok("GET", "/openapi.json")  # type: ignore[no-any-return]


def _links(document: dict[str, Any], method: str, path: str, status: str) -> dict[str, Any]:
    return document["paths"][path][method]["responses"][status]["links"]  # type: ignore[no-any-return]


def test_served_document_validates_as_openapi_3(server: Server) -> None:
    document = _document(server)
    assert document["openapi"].startswith("3.")
    validate(document)


def test_creating_a_project_links_to_its_state_settings_forks_and_packets(server: Server) -> None:
    links = _links(_document(server), "post", "/projects", "201")
    assert links["ReadState"] == {
        "operationRef": STATE,
        "parameters": {"project_id": "$response.body#/project/id"},
    }
    for name in ("ChangeSettings", "CreateFork", "CreatePacket", "AddMember"):
        assert links[name]["parameters"] == {"project_id": "$response.body#/project/id"}


def test_a_requested_review_links_to_its_receipt_approval_and_promotion(server: Server) -> None:
    links = _links(_document(server), "post", "/projects/{project_id}/reviews", "202")
    review = {"project_id": "$request.path.project_id", "review_id": "$response.body#/review/id"}
    assert links["ReadReceipt"] == {"operationRef": f"{REVIEW}~1receipt/get", "parameters": review}
    assert links["ReadHistory"]["operationRef"] == f"{REVIEW}~1history/get"
    assert links["Approve"] == {
        "operationRef": f"{REVIEW}~1approve/post",
        "parameters": review,
        "requestBody": {"commit": "$response.body#/review/commit"},
    }
    assert links["Promote"]["requestBody"] == {"commit": "$response.body#/review/commit"}


def test_every_link_names_an_operation_and_fills_its_path(server: Server) -> None:
    document = _document(server)
    resolved = SchemaPath.from_dict(document)
    count = 0
    for path, operations in document["paths"].items():
        for operation in operations.values():
            for response in operation["responses"].values():
                for link in response.get("links", {}).values():
                    pointer = link["operationRef"].removeprefix("#/").split("/")
                    target_path = pointer[1].replace("~1", "/").replace("~0", "~")
                    assert target_path in document["paths"], (path, link)
                    assert (resolved / "paths" / target_path / pointer[2]).exists(), link
                    wanted = {part[1:-1] for part in target_path.split("/") if part[:1] == "{"}
                    target = document["paths"][target_path][pointer[2]]
                    query = {p["name"] for p in target.get("parameters", []) if p["in"] == "query"}
                    # Every path parameter filled; beyond them, only the target's query ones.
                    assert wanted <= set(link["parameters"]) <= wanted | query, (path, link)
                    count += 1
    assert count >= 40
    # schemathesis reads every link as a valid transition
    schema = schemathesis.openapi.from_dict(document)
    schema.as_state_machine()
    assert schema.statistic.transitions.total >= count
