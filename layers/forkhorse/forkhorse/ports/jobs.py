"""PromoteJobs port: where a requested promote job runs.

Locally a thread in the serving process; on AWS the PromoteFunction, invoked
asynchronously, because a Lambda's background threads freeze once its response returns.
Either way the job is the same `Promotions.run_job`, and its outcome lives in the Store.
"""

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Protocol

from pydantic import BaseModel

from forkhorse.domain.wire import WIRE_CONFIG


class PromoteJob(BaseModel):
    """Names a queued promotion; everything else is read from the Store (so the event
    selects nothing: no commit, generation or digest)."""

    model_config = WIRE_CONFIG

    project_id: str
    promotion_id: str


class PromoteJobs(Protocol):
    def start(self, job: PromoteJob, run: Callable[[PromoteJob], object]) -> None:
        """Have `run(job)` happen soon, outside this request; return at once. An adapter
        that runs the job in another process calls the same `run` there."""
        ...


class ThreadPromoteJobs:
    """Local mode (the default, like `SystemClock`): the serving process runs each job on
    its executor."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    def start(self, job: PromoteJob, run: Callable[[PromoteJob], object]) -> None:
        self._executor.submit(run, job)
