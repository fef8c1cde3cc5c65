"""Issue 28: git requests' own slots (`githttp/admission.py`) and how the service
answers an ancestry question past its bound. The attacks themselves are in
tests/hostile/test_git_walks.py."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import pytest
from forkhorse.domain.limits import GIT_CONCURRENCY, GitConcurrencyLimits
from forkhorse.githttp.admission import GitAdmission
from forkhorse.ports.ancestry import HistoryTooLong
from forkhorse.serve import THREADS
from forkhorse.service.context import Context, ServiceSettings
from forkhorse.service.errors import Conflict

LIMITS = GitConcurrencyLimits(
    requests=3, per_project=2, waiting=1, wait_seconds=0.2, retry_after_seconds=7
)


def test_the_server_always_has_threads_beyond_what_git_may_hold() -> None:
    assert GIT_CONCURRENCY.requests + GIT_CONCURRENCY.waiting + 2 <= THREADS
    assert GIT_CONCURRENCY.per_project <= GIT_CONCURRENCY.requests


def test_a_project_gets_at_most_its_slots_and_all_projects_at_most_theirs() -> None:
    admission = GitAdmission(LIMITS)
    with admission.admitted("a") as first, admission.admitted("a") as second:
        assert first
        assert second
        started = time.monotonic()
        with admission.admitted("a") as third:  # waits its 0.2 s, then is refused
            assert not third
        assert time.monotonic() - started >= 0.15
        with admission.admitted("b") as other:  # another project still has a slot
            assert other
            assert admission.running() == 3
            with admission.admitted("c") as past_all:
                assert not past_all
    assert admission.running() == 0
    assert admission.retry_after_seconds == 7


def test_only_so_many_wait_and_a_freed_slot_admits_a_waiter() -> None:
    admission = GitAdmission(
        GitConcurrencyLimits(requests=1, per_project=1, waiting=1, wait_seconds=5.0)
    )
    outcome: list[bool] = []
    held = admission.admitted("a")
    assert held.__enter__()

    def wait() -> None:
        with admission.admitted("a") as admitted:
            outcome.append(admitted)

    waiter = threading.Thread(target=wait)
    waiter.start()
    deadline = time.monotonic() + 5
    while admission._waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    with admission.admitted("b") as refused:  # the one waiting place is taken: no wait
        assert not refused
    held.__exit__(None, None, None)
    waiter.join(10)
    assert outcome == [True]
    assert admission.running() == 0


class _Repos:
    project = "p"

    def head(self, fork: str | None = None) -> str:
        return "a" * 40


class _Host:
    def store(self, project: str) -> _Repos:
        return _Repos()


class _TooLong:
    def is_ancestor(self, repos: Any, ancestor: str, descendant: str) -> bool:
        raise HistoryTooLong("more than 3 commits not read before")


def test_an_ancestry_question_past_its_bound_is_a_conflict_that_says_so() -> None:
    context = Context(
        cast(Any, None),
        cast(Any, _Host()),
        cast(Any, None),
        cast(Any, None),
        ServiceSettings(),
        None,
        _TooLong(),
    )
    with pytest.raises(Conflict, match=r"too much history.*ask again"):
        context.require_fast_forward("p", "b" * 40)
