"""Running the client CLI as an agent or an owner would: a real subprocess of `forkhorse`,
configured only by its environment (never a token in argv), with every process's command
line sampled while it runs, so tests can prove no token ever showed there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import forkhorse

PACKAGE_ROOT = str(Path(forkhorse.__file__).resolve().parents[1])
CLI_SECONDS = 300
SAMPLE_SECONDS = 0.01


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def command_lines() -> set[str]:
    """Every live process's arguments, as `ps` would show them."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            # Another process's arguments need not be UTF-8.
            found.add(raw.replace(b"\0", b" ").decode(errors="replace"))
    return found


@dataclass
class Seen:
    """Everything the commands showed: outputs and the process list while they ran."""

    outputs: list[str] = field(default_factory=list)
    command_lines: set[str] = field(default_factory=set)


@dataclass
class Cli:
    url: str
    token: str
    home: Path
    seen: Seen
    project: str | None = None

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "PYTHONPATH": PACKAGE_ROOT,
            "FORKHORSE_URL": self.url,
            "FORKHORSE_TOKEN": self.token,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        if self.project:
            env["FORKHORSE_PROJECT"] = self.project
        return env | extra

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Ran:
        stop = threading.Event()
        sampler = threading.Thread(target=self._sample, args=(stop,), daemon=True)
        sampler.start()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "forkhorse.cli", *args],
                cwd=cwd or self.home,
                env=self.env(**(env or {})),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=CLI_SECONDS,
                check=False,
            )
        finally:
            stop.set()
            sampler.join()
        self.seen.outputs += [done.stdout, done.stderr]
        return Ran(done.returncode, done.stdout, done.stderr)

    def _sample(self, stop: threading.Event) -> None:
        while not stop.wait(SAMPLE_SECONDS):
            self.seen.command_lines |= command_lines()


def run_async[T](function: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`anyio.run` on a thread of its own: under xdist a worker's main thread may already
    hold another library's running event loop (Playwright's sync API keeps one)."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(anyio.run, function, *args).result()
