"""The PromoteRun workflow's contracts: what each promote step takes and returns, on the
package's one wire configuration (the ReceiptRun's are in `runner.workflow.contracts`)."""

from __future__ import annotations

from pydantic import Field

from forkhorse.domain.run import RunRef
from forkhorse.domain.wire import WireModel, is_none


class PromoteStart(WireModel):
    """A PromoteRun execution's input, and Acquire's: the promotion, nothing else."""

    project_id: str
    promotion_id: str


class PromoteState(PromoteStart):
    """What flows between PromoteRun's states: each step's output is its input plus what
    it adds (Acquire the lease, StartRun the run, Verify the digest, Write the outcome; a
    Catch adds `error` for Settle)."""

    token: int | None = Field(default=None, exclude_if=is_none)
    lease_seconds: int | None = Field(default=None, exclude_if=is_none)
    lease_expires_at: str | None = Field(default=None, exclude_if=is_none)
    required: bool | None = Field(default=None, exclude_if=is_none)
    run: RunRef | None = Field(default=None, exclude_if=is_none)
    digest: str | None = Field(default=None, exclude_if=is_none)
    outcome: str | None = Field(default=None, exclude_if=is_none)
    error: dict[str, str] | None = Field(default=None, exclude_if=is_none)


class RunReserved(PromoteState):
    """StartRun's output: `run` is always on the wire, null in advisory mode, which the
    Mode choice tests with IsNull."""

    run: RunRef | None = None
