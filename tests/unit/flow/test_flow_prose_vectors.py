"""Replay the reference's answers on generated reviewer prose (no reference needed to run).

Made by scripts/conformance/generate_prose_vectors.py; every stored output was also accepted by
the reference's own validator when generated, and must pass Forkhorse's validator here.
"""

from __future__ import annotations

from typing import Any

import pytest
from flow_factories import load_vectors
from forkhorse.flow.findings import validate_container
from forkhorse.flow.producer import build_findings
from forkhorse.flow.prose import ParseScope, parse_findings

PROSE = load_vectors("generated-producer/prose-parser-vectors.json")["vectors"]
BUILDER = load_vectors("generated-producer/builder-vectors.json")["vectors"]


@pytest.mark.parametrize("vector", PROSE, ids=[v["name"] for v in PROSE])
def test_prose_parser_matches_reference(vector: dict[str, Any]) -> None:
    produced = parse_findings(vector["text"], ParseScope(**vector["scope"]))
    assert produced == vector["expected"]
    if produced is not None:
        validate_container(produced)


@pytest.mark.parametrize("vector", BUILDER, ids=[v["name"] for v in BUILDER])
def test_builder_matches_reference(vector: dict[str, Any]) -> None:
    produced = build_findings(
        vector["text"],
        review_type=vector["review_type"],
        review_id=vector["review_id"],
        backend=vector["backend"],
        head_sha="b" * 40,
        base_sha="a" * 40,
        prior=None,
    )
    assert produced == vector["expected"]


def test_the_vectors_exercise_every_outcome() -> None:
    parsed = [v["expected"] for v in PROSE if v["expected"] is not None]
    statuses = {item["status"] for container in parsed for item in container["items"]}
    assert statuses >= {"open", "fixed", "not_fixed"}
    assert any(item.get("anchor") for c in parsed for item in c["items"])
    assert any(not c["items"] for c in parsed)  # explicit empty
    assert len(parsed) * 4 >= len(PROSE)  # a quarter or more parse
