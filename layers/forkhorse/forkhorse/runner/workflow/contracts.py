"""The ReceiptRun step contracts: what each step takes and returns (PromoteRun's are in
`service.promote.contracts`), on the package's one wire configuration (`WIRE_CONFIG`).

The step functions take and return these models; the Lambda handlers validate the event
into a step's input model (`parse_step_input`) and dump its output (`to_wire`), and the local
supervisors pass the models themselves. Optional fields are absent from the wire unless set
(`exclude_if=is_none`), so a dump is byte for byte the JSON the state machines pass, store in
their histories, and journal locally.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from forkhorse.domain.checks import FullCheckDef, QuickCheckDef
from forkhorse.domain.receipts import FinalOutcome
from forkhorse.domain.run import RunRef
from forkhorse.domain.wire import WireModel, is_none
from forkhorse.ports.containers import ContainerHandle


class InvalidStepInput(ValueError):
    """A step's input is not its contract; the message names the step and every bad field."""


def parse_step_input[M: BaseModel](model: type[M], event: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(event)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc']) or '(input)'}: {problem['msg']}"
            for problem in error.errors(include_url=False)
        )
        raise InvalidStepInput(f"invalid {model.__name__} input: {problems}") from None


def to_wire(output: BaseModel) -> dict[str, Any]:
    """A step's output as the state machine passes it on."""
    return output.model_dump(mode="json", by_alias=True)


def input_model(step: Callable[..., Any]) -> type[BaseModel]:
    """The model a step function takes as its event (its second parameter)."""
    event = list(inspect.signature(step).parameters)[1]
    model = typing.get_type_hints(step)[event]
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{step.__name__} does not take a step contract")
    return model


class ExecutionInput(WireModel):
    """A ReceiptRun execution's input, and Prepare's."""

    run: RunRef
    # Step Functions adds it to a nested execution's input (PromoteRun's BeforePromoteRun).
    started_by: str | None = Field(
        default=None, alias="AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID", exclude_if=is_none
    )


class PreparedChecks(WireModel):
    """Prepare found `.forkhorse/checks`: the definitions to run, in the file's order."""

    discovery: Literal["checks"]
    tree: str
    quick: list[QuickCheckDef]
    full: list[FullCheckDef]
    quick_count: int


class PreparedAbsent(WireModel):
    """No `.forkhorse/checks`: finalize discards the execution."""

    discovery: Literal["absent"]
    quick: list[QuickCheckDef]
    full: list[FullCheckDef]
    quick_count: int


class PreparedInvalid(WireModel):
    """`.forkhorse/checks` is invalid or unreadable; `message` says why."""

    discovery: Literal["invalid"]
    message: str
    quick: list[QuickCheckDef]
    full: list[FullCheckDef]
    quick_count: int


type Prepared = Annotated[
    PreparedChecks | PreparedAbsent | PreparedInvalid, Field(discriminator="discovery")
]


class QuickItem(WireModel):
    """One iteration of the QuickChecks map: the quick check step's input."""

    run: RunRef
    check: QuickCheckDef


class QuickDropped(WireModel):
    """The quick check's output: where its evidence was dropped; QuickRecord's input."""

    run: RunRef
    name: str
    evidence: str


class StepResult(WireModel):
    """A check's stored evidence: QuickRecord's output, one item of the execution's `quick`."""

    name: str
    outcome: FinalOutcome
    passed: bool
    result: str


class QuickGate(WireModel):
    """QuickGateCount's result: any quick check that did not pass closes the gate."""

    closed: bool


class FullItem(WireModel):
    """One iteration of the FullChecks map: FullStart's input. `wait_seconds` is how long
    the FullStart state waits for the check's end (its timeout and a margin, from the ASL)."""

    run: RunRef
    check: FullCheckDef
    wait_seconds: int | None = Field(default=None, exclude_if=is_none)


class FullLaunch(FullItem):
    """The FullStart function's payload on AWS: the item and the token to answer with."""

    task_token: str


class FullOvertime(FullItem):
    """FullOvertime's input: FullStart's, after its wait timed out (`timed_out`: the Catch's
    error and cause)."""

    timed_out: dict[str, str] | None = Field(default=None, exclude_if=is_none)


class Launched(WireModel):
    """The FullStart function's own answer (the state waits for the token's instead):
    whether a wait is held, or the check already finished and was answered."""

    waiting: bool


class Answered(WireModel):
    """FullStopped's answer: whether the ended task was a held check's, answered now."""

    answered: bool


class FullResult(WireModel):
    """FullFinished's result: one item of the execution's `full`."""

    name: str
    outcome: FinalOutcome
    result: str


class FullProgress(WireModel):
    """`full_start`'s and `full_poll`'s output (and `full_poll`'s input): a running container's
    handle, or once `done` the stored evidence."""

    run: RunRef
    check: FullCheckDef
    # The poll interval of executions an earlier version started (read, no longer written).
    poll_seconds: int | float | None = Field(default=None, exclude_if=is_none)
    done: bool
    handle: ContainerHandle | None = Field(default=None, exclude_if=is_none)
    name: str | None = Field(default=None, exclude_if=is_none)
    outcome: FinalOutcome | None = Field(default=None, exclude_if=is_none)
    passed: bool | None = Field(default=None, exclude_if=is_none)
    result: str | None = Field(default=None, exclude_if=is_none)

    def finished(self) -> FullResult:
        if not self.done or self.outcome is None or self.result is None:
            raise InvalidStepInput("the full check has not finished")
        return FullResult(name=self.check.name, outcome=self.outcome, result=self.result)


class ExecutionState(ExecutionInput):
    """What the execution has gathered by Finalize: Finalize's input (and, with only `run`
    and `infrastructureError`, FinalizeInfrastructureError's)."""

    prepared: Prepared | None = Field(default=None, exclude_if=is_none)
    quick: list[StepResult] | None = Field(default=None, exclude_if=is_none)
    quick_gate: QuickGate | None = Field(default=None, exclude_if=is_none)
    full: list[FullResult] | None = Field(default=None, exclude_if=is_none)
    infrastructure_error: bool | None = Field(default=None, exclude_if=is_none)


class Finalized(WireModel):
    """Finalize's output, the execution's output."""

    attached: bool
    discovery: Literal["absent"] | None = Field(default=None, exclude_if=is_none)
    discarded: bool | None = Field(default=None, exclude_if=is_none)
    reason: str | None = Field(default=None, exclude_if=is_none)
    digest: str | None = Field(default=None, exclude_if=is_none)
    status: FinalOutcome | None = Field(default=None, exclude_if=is_none)
