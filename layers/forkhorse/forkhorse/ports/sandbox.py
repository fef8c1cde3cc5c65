"""QuickSandbox port: run one quick check in a fresh, network-less, secret-less sandbox."""

from typing import Protocol

from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.receipts import CheckRecord, Evidence
from forkhorse.ports.git import Snapshot


class QuickSandbox(Protocol):
    """One fresh child per check; the sandbox owns the budget, the capability and the deadline.

    `run_check` never raises for anything the check does: every failure is a record with
    outcome `failed`, `infrastructure-error` or `timed-out`. It creates the check's own
    `SnapshotBudget` and reader from `snapshot`, so it can revoke them at the deadline.
    """

    @property
    def platform(self) -> str:
        """Where it ran: `local-bwrap`, `aws-lambda` or `mock`."""
        ...

    @property
    def evidence(self) -> Evidence:
        """`dynamic-worker` for a real sandbox, `mocked-worker-loader` for the mock."""
        ...

    def run_check(self, snapshot: Snapshot, definition: QuickCheckDef) -> CheckRecord: ...
