"""kill -9 of the local server at every promote step, then a restart: the server answers
while the dead workflow's lease is still live, the promote resumes or settles, canonical
moves at most once and the ledger is exact."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from forkhorse.domain.receipts import parse_timestamp
from forkhorse.responses import ErrorBody
from forkhorse.service.errors import CHECKS_FAILED_BEFORE_PROMOTE
from forkhorse.service.facade import ServiceSettings
from forkhorse.wiring.local import build_local_app, build_local_runtime

from tests.integration.promote import promote_crash_worker
from tests.integration.promote.promote_crash_worker import OWNER
from tests.support.forked import start_worker
from tests.support.status import http_status

WORKER_SECONDS = 120.0
SETTLE_SECONDS = 60.0
# Where the resumed promote ends: a run reserved but never started is an infrastructure
# error after the restart (409); from anywhere else it completes.
OUTCOMES = {
    "Acquire": 200,
    "StartRun": 409,
    "RunChecks": 200,
    "Verify": 200,
    "Write": 200,
    "Release": 200,
}


def _killed_at(home: Path, step: str) -> dict[str, str]:
    with start_worker(promote_crash_worker.promote_and_die, home, step) as worker:
        ids: dict[str, str] = worker.first_message(WORKER_SECONDS)
        assert worker.exit_code(WORKER_SECONDS) == -9, f"the worker was not killed after {step}"
    return ids


@pytest.mark.parametrize("step", list(OUTCOMES))
def test_kill_9_at_every_promote_step_resumes_or_settles(tmp_path: Path, step: str) -> None:
    home = tmp_path / "home"
    ids = _killed_at(home, step)
    killed = time.monotonic()
    runtime = build_local_runtime(home)
    app = build_local_app(runtime, ServiceSettings())
    try:
        project, review = ids["project"], ids["review"]
        first = app.service.promotions.status(OWNER, project, review)
        answered = time.monotonic() - killed
        print(f"kill -9 after {step}: the restarted server answered in {answered:.3f} s")
        journaled = runtime.journal.last(runtime.store.list_promotions(project)[-1].id)
        assert journaled is not None
        expires = journaled[1].get("leaseExpiresAt")
        if expires is not None:  # it answered while the dead process's lease was live
            assert datetime.now(UTC) < parse_timestamp(expires)
        assert http_status(first) in (202, OUTCOMES[step])
        answer = _settled(app, project, review)
        assert http_status(answer) == OUTCOMES[step], answer.body
        ledger = runtime.store.ledger(project)
        head = runtime.git.store(project).head()
        if http_status(answer) == 200:
            assert [entry.commit for entry in ledger] == [ids["commit"]]
            assert ledger[0].previous_head == ids["initial"]
            assert head == ids["commit"]
        else:
            assert answer.body == ErrorBody(error=CHECKS_FAILED_BEFORE_PROMOTE)
            assert ledger == []
            assert head == ids["initial"]
        assert runtime.store.open_promotion(project) is None
    finally:
        app.close()


def _settled(app, project: str, review: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        answer = app.service.promotions.status(OWNER, project, review)
        if not answer.pending or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)
