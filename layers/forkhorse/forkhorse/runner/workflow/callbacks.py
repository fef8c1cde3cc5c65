"""Full checks without a poll loop (AWS): the FullStart state waits for a task token.

ReceiptRun's FullStart state invokes the FullStart function with a task token
(`lambda:invoke.waitForTaskToken`) and waits, billing no transition, until the token is
answered or the state's timeout (the check's own and `WAIT_MARGIN_SECONDS`) passes:

- `full_launch` (FullStart): starts the container as `steps.full_start` does and holds the
  token (`FullWaits`); a check that finished at once (refused image, export past its limits)
  is answered at once.
- `full_stopped` (FullStopped, on ECS's task state change to STOPPED): collects the ended
  check as `steps.full_poll` does, records its evidence and answers the token.
- `full_overtime` (FullOvertime, the state's Catch on States.Timeout): the check ran past
  its timeout, or its end was never reported; it stops what still runs and records it as
  `steps.full_poll` would past the deadline. A task lost, stopped by AWS or whose image
  could not be pulled ends as the poll ended it: an infrastructure error, never a pass.

Each hold is claimed once, so a late FullStopped never answers a second time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from forkhorse.ports.containers import ContainerEnded
from forkhorse.ports.orchestrator import TaskCallbacks
from forkhorse.ports.waits import FullWaits, HeldWait
from forkhorse.runner.workflow import steps
from forkhorse.runner.workflow.contracts import (
    Answered,
    FullItem,
    FullLaunch,
    FullOvertime,
    FullProgress,
    Launched,
    to_wire,
)

log = logging.getLogger(__name__)

# The FullStart state waits the check's timeout and this (receipt_run.asl.json's MathAdd):
# the container's deadline is set a little after the state began.
WAIT_MARGIN_SECONDS = 5
# A hold outlives its state's timeout by this much, then the table's TTL removes it.
HOLD_GRACE = timedelta(hours=1)
# FullOvertime sleeps at most this long for a deadline not yet reached (Lambda's is 60 s).
OVERTIME_SLEEP_SECONDS = 45.0
COLLECT_FAILED = "FullCollectFailed"


@dataclass(frozen=True)
class CallbackDeps:
    runner: steps.RunnerDeps
    waits: FullWaits
    callbacks: TaskCallbacks


def full_launch(deps: CallbackDeps, event: FullLaunch) -> Launched:
    """Start the check's container and hold the token until its end is reported."""
    item = FullItem(run=event.run, check=event.check, wait_seconds=event.wait_seconds)
    progress = steps.full_start(deps.runner, item)
    if progress.done or progress.handle is None:
        deps.callbacks.succeed(event.task_token, to_wire(progress))
        return Launched(waiting=False)
    waited = event.wait_seconds or event.check.timeout_seconds + WAIT_MARGIN_SECONDS
    expires = deps.runner.clock.now() + timedelta(seconds=waited) + HOLD_GRACE
    held = HeldWait(token=event.task_token, progress=progress.model_dump_json(by_alias=True))
    deps.waits.hold(event.run.generation, event.check.name, held, expires)
    if deps.runner.containers.poll(progress.handle) != "running":
        _answer(deps, event.run.generation, event.check.name)  # it ended before the hold
    return Launched(waiting=True)


def full_stopped(deps: CallbackDeps, ended: ContainerEnded) -> Answered:
    """Answer the held check whose task this was; any other task is not ours to answer."""
    for check, held in deps.waits.held(ended.execution).items():
        handle = _progress(held).handle
        if handle is not None and handle.container_id == ended.container_id:
            return Answered(answered=_answer(deps, ended.execution, check))
    return Answered(answered=False)


def full_overtime(deps: CallbackDeps, event: FullOvertime) -> FullProgress:
    """The wait timed out: end the check as the poll would past its deadline."""
    generation, check = event.run.generation, event.check.name
    held = deps.waits.claim(generation, check) or deps.waits.peek(generation, check)
    if held is None:
        raise LookupError(f"the timed-out full check {check!r} left no held wait")
    progress = _progress(held)
    handle = progress.handle
    if handle is not None and deps.runner.containers.poll(handle) == "running":
        early = handle.deadline - time.time()  # the state began a little before the task
        time.sleep(min(max(early, 0.0), OVERTIME_SLEEP_SECONDS))
    ended = steps.full_poll(deps.runner, progress)
    if not ended.done:
        raise RuntimeError(f"the full check {check!r} still runs before its deadline")
    return ended


def _answer(deps: CallbackDeps, generation: str, check: str) -> bool:
    """Claim the hold; the first claimant collects the check and answers the token."""
    held = deps.waits.claim(generation, check)
    if held is None:
        return False
    try:
        ended = steps.full_poll(deps.runner, _progress(held))
    except Exception as error:
        log.exception("collecting the full check %r failed", check)
        deps.callbacks.fail(held.token, COLLECT_FAILED, f"{type(error).__name__}: {error}")
        return True
    if not ended.done:
        # Reported stopped, described running: FullOvertime ends it when the wait times out.
        log.warning("the full check %r was reported ended but still runs", check)
        return False
    deps.callbacks.succeed(held.token, to_wire(ended))
    return True


def _progress(held: HeldWait) -> FullProgress:
    return FullProgress.model_validate_json(held.progress)
