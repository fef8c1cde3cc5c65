"""What the soak counts besides Locust's request statistics: failures by kind (5xx, a
connection refused while the server restarts, or one when it should be up), receipts by
outcome, promotions, and invariant violations."""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAMPLES_PER_KIND = 5
RESTART_GRACE_SECONDS = 3.0

# Failure kinds.
SERVER_ERROR = "5xx"
CONNECTION_DURING_RESTART = "connection-during-restart"
CONNECTION_UNEXPECTED = "connection-unexpected"
UNEXPECTED_STATUS = "unexpected-status"
GIT_OTHER = "git-other"
# Kinds that fail the soak: a restart window excuses only refused connections.
FAILING_KINDS = (SERVER_ERROR, CONNECTION_UNEXPECTED)

_GIT_STATUS = re.compile(r"(?:returned error: |HTTP )(\d{3})")
_GIT_CONNECTION = (
    "Failed to connect",
    "Couldn't connect",
    "Connection refused",
    "Connection reset",
    "Empty reply from server",
    "Recv failure",
    "transfer closed",
    "the remote end hung up",
    "unable to access",
)


@dataclass
class Restart:
    down_at: float  # monotonic
    up_at: float | None = None


@dataclass
class SoakContext:
    url: str
    port: int
    owner_token: str
    projects: dict[str, str]  # "working" / "hostile" -> project id
    canonical_urls: dict[str, str]
    work: Path
    owner_decides: bool = True  # agents wait for the owner after a passing review
    started: float = field(default_factory=time.monotonic)
    restarts: list[Restart] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    failure_samples: dict[str, list[str]] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    promotions: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    names: int = 0

    def next_name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}-{self.names}"

    def restarting(self, at: float | None = None) -> bool:
        """Whether `at` (now by default) falls in a restart: from the kill until the
        server answered again, plus a short grace."""
        moment = time.monotonic() if at is None else at
        return any(
            r.down_at <= moment <= (r.up_at or moment) + RESTART_GRACE_SECONDS
            for r in self.restarts
        )

    def fail(self, kind: str, detail: str) -> None:
        self.failures[kind] += 1
        samples = self.failure_samples.setdefault(kind, [])
        if len(samples) < SAMPLES_PER_KIND:
            samples.append(detail[:300])

    def connection_failed(self, detail: str) -> str:
        kind = CONNECTION_DURING_RESTART if self.restarting() else CONNECTION_UNEXPECTED
        self.fail(kind, detail)
        return kind

    def git_failed(self, what: str, stderr: str) -> str:
        """Classify a failed git command by what git printed."""
        status = _GIT_STATUS.search(stderr)
        if status and status.group(1).startswith("5"):
            self.fail(SERVER_ERROR, f"{what}: {stderr}")
            return SERVER_ERROR
        if any(marker in stderr for marker in _GIT_CONNECTION):
            return self.connection_failed(f"{what}: {stderr}")
        self.fail(GIT_OTHER, f"{what}: {stderr}")
        return GIT_OTHER

    def violated(self, what: str) -> None:
        self.violations.append(what)
