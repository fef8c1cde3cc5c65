"""The client has a call for every route the API describes (the committed openapi.json)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from forkhorse.client import ApiError, ClientConfig, ForkhorseClient

ROOT = Path(__file__).resolve().parents[3]
ARGUMENTS: dict[str, Any] = {
    "project": "P1",
    "review": "R1",
    "promotion": "M1",
    "packet": "K1",
    "fork": "F1",
    "agent_id": "A1",
    "commit": "a" * 40,
    "name": "name",
    "title": "title",
    "require_receipt": True,
    "protect_checks": True,
    "receipt": {"type": "impl_review"},
}
TEMPLATE = {
    "P1": "{project_id}",
    "R1": "{review_id}",
    "K1": "{packet_id}",
    "A1": "{agent_id}",
    "M1": "{promotion_id}",
}
CONVENIENCES = {"request", "close", "console_link", "witness_log", "witness_next_call"}


def _called_routes() -> set[tuple[str, str]]:
    called: set[tuple[str, str]] = set()

    def handle(request: httpx.Request) -> httpx.Response:
        parts = [TEMPLATE.get(part, part) for part in request.url.path.split("/")]
        called.add((request.method.lower(), "/".join(parts)))
        return httpx.Response(404, json={"error": "Not here."})

    client = ForkhorseClient(
        ClientConfig("https://service", "t"), transport=httpx.MockTransport(handle), witness=False
    )
    for name, method in inspect.getmembers(client, inspect.ismethod):
        if name.startswith("_") or name in CONVENIENCES:
            continue
        wanted = inspect.signature(method).parameters
        arguments = {key: ARGUMENTS[key] for key in wanted if key in ARGUMENTS}
        with pytest.raises(ApiError, match=r"^404: Not here\.$"):
            method(**arguments)
    return called


def test_every_route_has_a_client_call() -> None:
    document = json.loads((ROOT / "openapi.json").read_text())
    routes = {
        (method, path)
        for path, operations in document["paths"].items()
        for method in operations
        if path != "/openapi.json"
    }
    assert routes
    assert _called_routes() == routes
