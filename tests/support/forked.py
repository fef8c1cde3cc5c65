"""Crash workers forked from one parent that has already imported forkhorse (multiprocessing's
forkserver). Each worker is a fresh single-threaded process of its own, so a kill -9 at a
crash point is a real process death; only the package's import (about a second of CPU) is
paid once per test process instead of once per worker.

A worker's target takes a `Connection` first and sends its first message (the ids it set
up) on it; the test reads that message, then the worker's exit code (-9 when it killed
itself). Leaving a `with worker:` block kills it with SIGKILL, whatever happened."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

# What every crash worker imports: loaded once, in the fork server, before any fork.
PRELOAD = [
    "forkhorse.wiring.local",
    "tests.integration.faults.path_worker",
    "tests.integration.promote.promote_crash_worker",
    "tests.integration.runner.crash_worker",
]
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOAD)


@dataclass
class ForkedWorker:
    process: BaseProcess
    messages: Connection

    def first_message(self, timeout: float) -> Any:
        """What the worker sent first; it fails if the worker died or stayed silent."""
        try:
            if self.messages.poll(timeout):
                return self.messages.recv()
        except EOFError:
            pass  # it ended without a word
        raise AssertionError(
            f"the worker sent nothing within {timeout:.0f} s (exit {self.exit_code(1)})"
        )

    def exit_code(self, timeout: float) -> int | None:
        self.process.join(timeout)
        return self.process.exitcode

    def stop(self) -> None:
        """kill -9 the worker, unless it has ended, and reap it."""
        if self.process.exitcode is None:
            self.process.kill()
        self.process.join()
        self.messages.close()

    def __enter__(self) -> ForkedWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_worker(target: Callable[..., None], *args: Any) -> ForkedWorker:
    """`target(connection, *args)` in a process forked from the preloaded server."""
    received, sent = _CONTEXT.Pipe(duplex=False)
    process = _CONTEXT.Process(target=target, args=(sent, *args), daemon=True)
    process.start()
    sent.close()
    return ForkedWorker(process, received)
