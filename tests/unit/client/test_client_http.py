"""The client's HTTP policy: the service's refusals as errors with its sentence, and
retries on connection errors and 5xx for idempotent calls only."""

from __future__ import annotations

import httpx
import pytest
from forkhorse.client import ApiError, ClientConfig, ForkhorseClient, ServiceUnavailable
from forkhorse.client.api import IDEMPOTENT_ATTEMPTS

STATE = {
    "project": {
        "id": "p",
        "name": "p",
        "settings": {"requireReceipt": True},
        "policy": {"protectChecks": False},
        "canonicalHead": None,
        "cloneUrl": "http://s/git/p/canonical.git",
    },
    "forks": [],
    "packets": [],
    "reviews": [],
    "ledger": [],
}


def _client(
    answers: list[httpx.Response | Exception], seen: list[httpx.Request]
) -> ForkhorseClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    config = ClientConfig("http://service", "the-token")
    return ForkhorseClient(config, transport=httpx.MockTransport(handle), pause=lambda _: None)


def test_a_read_is_retried_through_5xx_and_dropped_connections() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.Response(503, json={"error": "Busy."}),
        httpx.ReadError("dropped"),
        httpx.Response(200, json=STATE),
    ]
    state = _client(answers, seen).state("p")
    assert state.project.id == "p"
    assert len(seen) == 3
    assert seen[0].headers["Authorization"] == "Bearer the-token"


def test_a_read_gives_up_after_its_attempts() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.Response(502, json={"error": "Bad gateway."})
    ] * IDEMPOTENT_ATTEMPTS
    with pytest.raises(ServiceUnavailable, match="Bad gateway"):
        _client(answers, seen).state("p")
    assert len(seen) == IDEMPOTENT_ATTEMPTS


def test_a_review_request_is_never_sent_twice() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [httpx.Response(500, json={"error": "Oops."})]
    with pytest.raises(ServiceUnavailable):
        _client(answers, seen).request_review("p", "k", "f", "a" * 40)
    assert len(seen) == 1
    assert seen[0].headers["Content-Type"] == "application/json"


def test_a_refusal_carries_the_services_sentence_status_and_reasons() -> None:
    seen: list[httpx.Request] = []
    body = {"error": "Receipt gate refused.", "reasons": ["no receipt"]}
    with pytest.raises(ApiError) as refused:
        _client([httpx.Response(409, json=body)], seen).approve("p", "r", "a" * 40)
    assert (refused.value.status, refused.value.error) == (409, "Receipt gate refused.")
    assert refused.value.reasons == ["no receipt"]
    assert "the-token" not in str(refused.value)
    assert seen[0].read() == b'{"commit":"' + b"a" * 40 + b'"}'
