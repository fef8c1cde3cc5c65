"""The client's HTTP policy: the service's refusals as errors with its sentence, and
retries on connection errors and 5xx for idempotent calls only; no request, redirect or
push carries the token to another origin than the configured service's."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from forkhorse.client import (
    ApiError,
    ClientConfig,
    ClientError,
    ForkhorseClient,
    ServiceUnavailable,
    UsageError,
    gitpush,
)
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

    config = ClientConfig("https://service", "the-token")
    transport = httpx.MockTransport(handle)
    return ForkhorseClient(config, transport=transport, pause=lambda _: None, witness=False)


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


@pytest.mark.parametrize(
    "location", ["http://127.0.0.1:9/projects/p/state", "https://service/elsewhere", "//evil/x"]
)
def test_a_redirect_is_never_followed(location: str) -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.Response(307, headers={"Location": location})
    ]
    with pytest.raises(ClientError, match="follows no redirect") as refused:
        _client(answers, seen).state("p")
    assert len(seen) == 1
    assert "the-token" not in str(refused.value)


def test_a_path_never_leaves_the_configured_origin() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [httpx.Response(404, json={"error": "No."})] * 3
    client = _client(answers, seen)
    for project in ("//evil.example", "@evil.example", "..%2f..%2f"):
        with pytest.raises(ApiError):
            client.state(project)
    assert {request.url.host for request in seen} == {"service"}


def test_a_fork_on_another_origin_is_never_pushed_to(tmp_path: Path) -> None:
    service = ClientConfig("https://service", "the-token")
    for clone_url in (
        "https://evil.example/git/p/forks/f.git",
        "https://service:8443/git/p/forks/f.git",
        "http://service/git/p/forks/f.git",
        "ext::sh -c touch% /tmp/pwned",
        "--upload-pack=touch /tmp/pwned",
        str(tmp_path),
    ):
        with pytest.raises(UsageError, match="Refusing to send the token") as refused:
            gitpush.push_head(tmp_path, clone_url, service)
        assert "the-token" not in str(refused.value)
