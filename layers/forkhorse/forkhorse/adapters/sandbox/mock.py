"""A mock quick sandbox for tests of OTHER parts (runner, API, console) only.

It never runs the module: it reads the module source through a budgeted reader (so the digest
is real) and returns a scripted outcome per check name. Its evidence is always
`mocked-worker-loader` and its platform `mock`, so the approval gate refuses its records.
"""

from __future__ import annotations

from collections.abc import Mapping

from forkhorse.domain.checks import QuickCheckDef, quick_module_digest
from forkhorse.domain.logs import EMPTY_LOG
from forkhorse.domain.receipts import CheckRecord, Evidence, FinalOutcome
from forkhorse.domain.snapshot import SnapshotBudget, SnapshotError
from forkhorse.ports.git import Snapshot

MOCK_MESSAGE = "Mocked quick check."


class MockSandbox:
    platform = "mock"
    evidence: Evidence = "mocked-worker-loader"

    def __init__(self, outcomes: Mapping[str, FinalOutcome] | None = None) -> None:
        self._outcomes = dict(outcomes or {})
        self.calls: list[str] = []

    def run_check(self, snapshot: Snapshot, definition: QuickCheckDef) -> CheckRecord:
        self.calls.append(definition.name)
        try:
            source = snapshot.reader(SnapshotBudget()).read(definition.module)
        except SnapshotError:
            source = None
        outcome = self._outcomes.get(definition.name, "passed")
        return CheckRecord(
            name=definition.name,
            tier="quick",
            definition=definition.definition(),
            runtime="dynamic-worker",
            platform=self.platform,
            image_digest="" if source is None else quick_module_digest(source),
            outcome="infrastructure-error" if source is None else outcome,
            message=MOCK_MESSAGE,
            duration_ms=0,
            stdout=EMPTY_LOG,
            stderr=EMPTY_LOG,
        )
