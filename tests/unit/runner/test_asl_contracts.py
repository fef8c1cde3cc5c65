"""The state machines against the step contracts: walking every path of
statemachine/*.asl.json, what each state passes (the whole state, `Parameters`, a Map's
`ItemSelector`, a nested execution's `Input`) must be its step's input contract, what it
reads (`ResultPath`, Choice variables, `ItemsPath`, `SecondsPath`, paths in `Parameters`)
must be fields of the contract it reads them from, and the results it stores must be the
type the later steps expect. Renaming a field on either side fails here."""

from __future__ import annotations

import copy
import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAliasType

import pytest
from forkhorse.domain.receipts import FinalOutcome
from forkhorse.ports.containers import LaunchThrottled
from forkhorse.runner.workflow.contracts import (
    ExecutionInput,
    FullProgress,
    FullResult,
    QuickGate,
    input_model,
)
from forkhorse.service.promote.contracts import PromoteStart
from forkhorse.wiring.handlers import StepHandler
from pydantic import BaseModel, Field

from tests.support.promote import PROMOTE_FUNCTIONS
from tests.support.step_functions import FUNCTIONS, load_handler

ROOT = Path(__file__).resolve().parents[3]
NESTED_EXECUTION = "arn:aws:states:::states:startExecution.sync:2"
CALLBACK = "arn:aws:states:::lambda:invoke.waitForTaskToken"
# A state that waits for a task token goes on with the token's answer, not the function's.
CALLBACK_OUTPUTS: dict[str, type[BaseModel]] = {"FullStartFunctionArn": FullProgress}
# What an intrinsic function makes.
INTRINSICS: dict[str, type] = {"States.ArrayContains": bool, "States.MathAdd": int}
# What the machines start with, and what their Pass states make.
EXECUTION_INPUTS: dict[str, type[BaseModel]] = {
    "receipt_run": ExecutionInput,
    "promote": PromoteStart,
}
PASS_RESULTS: dict[str, type[BaseModel]] = {"QuickGateCount": QuickGate, "FullFinished": FullResult}
_PATH = re.compile(r"\$(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[\*\])?)*")

Shape = dict[str, Any]  # a state's JSON at one point: key -> the annotation of its value


@dataclass(frozen=True)
class Contract:
    takes: type[BaseModel]
    returns: Any


@dataclass
class Walk:
    """One machine's walk: its task contracts and the problems found."""

    tasks: dict[str, Contract]
    pass_results: dict[str, type[BaseModel]]
    problems: list[str] = field(default_factory=list)
    seen: set[tuple[str, frozenset[str]]] = field(default_factory=set)


# --- annotations --------------------------------------------------------------------------


def _unwrap(annotation: Any) -> Iterator[Any]:
    """The leaves of an annotation: through aliases, Annotated, unions and Optional."""
    if isinstance(annotation, TypeAliasType):
        yield from _unwrap(annotation.__value__)
    elif typing.get_origin(annotation) is typing.Annotated:
        yield from _unwrap(typing.get_args(annotation)[0])
    elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for argument in typing.get_args(annotation):
            yield from _unwrap(argument)
    elif annotation is not type(None):
        yield annotation


def _models(annotation: Any) -> set[type[BaseModel]]:
    return {leaf for leaf in _unwrap(annotation) if _is_model(leaf)}


def _is_model(leaf: Any) -> bool:
    return isinstance(leaf, type) and issubclass(leaf, BaseModel)


def _item(annotation: Any) -> Any:
    """A list annotation's item annotation (None when it is no list)."""
    for leaf in _unwrap(annotation):
        if typing.get_origin(leaf) is list:
            return typing.get_args(leaf)[0]
    return None


def _fields(model: type[BaseModel]) -> Shape:
    return {(info.alias or name): info.annotation for name, info in model.model_fields.items()}


def _required(model: type[BaseModel]) -> set[str]:
    return {(info.alias or name) for name, info in model.model_fields.items() if info.is_required()}


def _accepts(expected: Any, given: Any) -> bool:
    """May a value of `given` stand where `expected` is declared? Compared by models (and
    list items); plain values (str, bool, ...) are the models' own business."""
    expected_item, given_item = _item(expected), _item(given)
    if given_item is not None:
        return expected_item is not None and _accepts(expected_item, given_item)
    wanted, got = _models(expected), _models(given)
    return all(any(issubclass(model, w) for w in wanted) for model in got)


def _shape_of(annotation: Any) -> Shape | None:
    """The keys of a JSON object of this annotation; every model of a union must have a key."""
    models = _models(annotation)
    if not models:
        return None
    shapes = [_fields(model) for model in models]
    return {key: value for key, value in shapes[0].items() if all(key in s for s in shapes)}


# --- paths ----------------------------------------------------------------------------------


def _resolve(walk: Walk, where: str, shape: Shape, path: str) -> Any:
    """The annotation a JSONPath reads from the state, or a problem when it reads nothing."""
    current: Any = None
    keys: Shape | None = shape
    for step in path.removeprefix("$").split(".")[1:]:
        name, many = step.removesuffix("[*]"), step.endswith("[*]")
        if keys is None or name not in keys:
            walk.problems.append(f"{where}: {path} reads {name!r}, which is not in the contract")
            return None
        current = keys[name]
        if many:
            current = _item(current)
        keys = _shape_of(current)
    return current


def _paths_in(value: Any) -> Iterator[str]:
    """The state paths a Parameters value reads (context `$$` paths are Step Functions')."""
    if isinstance(value, str):
        for match in _PATH.finditer(value):
            start = match.start()
            if value[start - 1 : start] != "$" and value[start : start + 2] != "$$":
                yield match.group(0)


def _built(walk: Walk, where: str, shape: Shape, parameters: dict[str, Any]) -> Shape:
    """The JSON a `Parameters` or `ItemSelector` object builds from the state."""
    built: Shape = {}
    for key, value in parameters.items():
        if key.endswith(".$"):
            paths = list(_paths_in(value))
            read = [_resolve(walk, where, shape, path) for path in paths]
            intrinsic = (
                INTRINSICS.get(value.split("(", 1)[0]) if value.startswith("States.") else None
            )
            built[key.removesuffix(".$")] = intrinsic or (read[0] if read else None)
        elif isinstance(value, dict):
            built[key] = dict
        else:
            built[key] = type(value)
    return built


def _check_input(walk: Walk, where: str, takes: type[BaseModel], given: Shape) -> None:
    """What reaches a step is its contract: no unknown key, every required key, and each
    value of the type the contract declares."""
    declared = _fields(takes)
    for key in sorted(set(given) - set(declared)):
        walk.problems.append(f"{where}: passes {key!r}, which {takes.__name__} does not take")
    for key in sorted(_required(takes) - set(given)):
        walk.problems.append(f"{where}: {takes.__name__} needs {key!r}, which is not passed")
    for key in sorted(set(given) & set(declared)):
        if given[key] is not None and not _accepts(declared[key], given[key]):
            walk.problems.append(f"{where}: {key!r} is not what {takes.__name__} declares")


def _stored(walk: Walk, where: str, shape: Shape, result_path: Any, result: Any) -> Shape:
    """The state after a result is stored at `ResultPath`."""
    if result_path is None:
        return shape
    if result_path == "$":
        return _shape_of(result) or {}
    key = result_path.removeprefix("$.")
    return {**shape, key: result}


# --- the walk ---------------------------------------------------------------------------------


def _visit(walk: Walk, states: dict[str, Any], name: str, shape: Shape) -> Any:
    """Walk from state `name` with the state's JSON `shape`; returns the annotation of the
    output of the branch's end (a Map iteration's result)."""
    key = (name, frozenset(shape))
    if key in walk.seen:
        return None
    walk.seen.add(key)
    state = states[name]
    kind = state["Type"]
    output: Any = None
    if kind == "Task":
        output = _task(walk, name, state, shape)
    elif kind == "Map":
        output = _map(walk, name, state, shape)
    elif kind == "Pass":
        output = _pass(walk, name, state, shape)
    elif kind == "Choice":
        for choice in state["Choices"]:
            for rule in [choice, *choice.get("And", [])]:
                if "Variable" in rule:
                    _resolve(walk, name, shape, rule["Variable"])
        targets = {choice["Next"] for choice in state["Choices"]} | {state["Default"]}
        ends = [_visit(walk, states, target, shape) for target in sorted(targets)]
        return next((end for end in ends if end is not None), None)
    elif kind == "Wait":
        _resolve(walk, name, shape, state["SecondsPath"])
        return _visit(walk, states, state["Next"], shape)
    else:
        return None
    for catch in state.get("Catch", []):
        caught = _stored(walk, name, shape, catch.get("ResultPath", "$"), dict[str, str])
        _visit(walk, states, catch["Next"], caught)
    after = _stored(walk, name, shape, state.get("ResultPath", "$"), output)
    if "Next" in state:
        return _visit(walk, states, state["Next"], after)
    return output


def _task(walk: Walk, name: str, state: dict[str, Any], shape: Shape) -> Any:
    if state["Resource"] == NESTED_EXECUTION:
        parameters = state["Parameters"]
        _built(walk, name, shape, {k: v for k, v in parameters.items() if k != "Input"})
        given = _built(walk, name, shape, parameters["Input"])
        _check_input(walk, name, EXECUTION_INPUTS["receipt_run"], given)
        return None
    callback = state["Resource"] == CALLBACK
    function = state["Parameters"]["FunctionName"] if callback else state["Resource"]
    resource = function.removeprefix("${").removesuffix("}")
    contract = walk.tasks.get(resource)
    if contract is None:
        walk.problems.append(f"{name}: {resource} runs no step with a contract")
        return None
    given = shape
    if "Parameters" in state:
        parameters = state["Parameters"]
        given = _built(walk, name, shape, parameters["Payload"] if callback else parameters)
    if "TimeoutSecondsPath" in state:
        _resolve(walk, name, shape, state["TimeoutSecondsPath"])
    _check_input(walk, name, contract.takes, given)
    return contract.returns


def _map(walk: Walk, name: str, state: dict[str, Any], shape: Shape) -> Any:
    items = _resolve(walk, name, shape, state["ItemsPath"])
    processor = state["ItemProcessor"]
    selected = _built(walk, name, shape, state["ItemSelector"])
    selected = {key: _item(items) if value is None else value for key, value in selected.items()}
    end = _visit(walk, processor["States"], processor["StartAt"], selected)
    return list[end] if end is not None else None  # type: ignore[valid-type]


def _pass(walk: Walk, name: str, state: dict[str, Any], shape: Shape) -> Any:
    built = _built(walk, name, shape, state["Parameters"])
    result = walk.pass_results.get(name)
    if result is None:
        walk.problems.append(f"{name}: a Pass state whose result has no contract")
        return None
    _check_input(walk, name, result, built)
    return result


def walk_machine(
    definition: dict[str, Any],
    start: type[BaseModel],
    tasks: dict[str, Contract],
    pass_results: dict[str, type[BaseModel]] = PASS_RESULTS,
) -> list[str]:
    walk = Walk(tasks, pass_results)
    _visit(walk, definition["States"], definition["StartAt"], _fields(start))
    unvisited = set(definition["States"]) - {state for state, _ in walk.seen}
    walk.problems += [f"{state}: never reached" for state in sorted(unvisited)]
    return list(dict.fromkeys(walk.problems))


# --- the contracts of the real machines -------------------------------------------------------


def _contracts(functions: dict[str, str]) -> dict[str, Contract]:
    contracts = {}
    for resource, directory in functions.items():
        handler = load_handler(directory)
        assert isinstance(handler, StepHandler)
        returns = CALLBACK_OUTPUTS.get(resource) or typing.get_type_hints(handler.step)["return"]
        contracts[resource] = Contract(input_model(handler.step), returns)
    return contracts


def _machine(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / f"statemachine/{name}.asl.json").read_text())
    return loaded


TASKS = {**_contracts(FUNCTIONS), **_contracts(PROMOTE_FUNCTIONS)}


@pytest.mark.parametrize("machine", sorted(EXECUTION_INPUTS))
def test_the_machine_passes_and_reads_exactly_the_step_contracts(machine: str) -> None:
    assert walk_machine(_machine(machine), EXECUTION_INPUTS[machine], TASKS) == []


def _walk_edited(machine: str, edit: Callable[[dict[str, Any]], None]) -> list[str]:
    definition = copy.deepcopy(_machine(machine))
    edit(definition)
    return walk_machine(definition, EXECUTION_INPUTS[machine], TASKS)


def _rename_key(mapping: dict[str, Any], old: str, new: str) -> None:
    mapping[new] = mapping.pop(old)


Rename = tuple[str, Callable[[dict[str, Any]], None], str]
RENAMES_IN_THE_MACHINES: dict[str, Rename] = {
    "a choice variable": (
        "receipt_run",
        lambda d: d["States"]["Discovery"]["Choices"][0]["And"][1].update(
            Variable="$.prepared.quickTotal"
        ),
        "Discovery: $.prepared.quickTotal reads 'quickTotal', which is not in the contract",
    ),
    "a result path": (
        "receipt_run",
        lambda d: d["States"]["Prepare"].update(ResultPath="$.prepare"),
        "Finalize: passes 'prepare', which ExecutionState does not take",
    ),
    "a map item's key": (
        "receipt_run",
        lambda d: _rename_key(d["States"]["FullChecks"]["ItemSelector"], "check.$", "checks.$"),
        "FullStart: $.check reads 'check', which is not in the contract",
    ),
    "a parameter": (
        "receipt_run",
        lambda d: _rename_key(
            d["States"]["FinalizeInfrastructureError"]["Parameters"],
            "infrastructureError",
            "infrastructureFailure",
        ),
        "FinalizeInfrastructureError: passes 'infrastructureFailure', which ExecutionState "
        "does not take",
    ),
    "a callback's timeout": (
        "receipt_run",
        lambda d: d["States"]["FullChecks"]["ItemProcessor"]["States"]["FullStart"].update(
            TimeoutSecondsPath="$.waitSecond"
        ),
        "FullStart: $.waitSecond reads 'waitSecond', which is not in the contract",
    ),
    "a callback's payload": (
        "receipt_run",
        lambda d: _rename_key(
            d["States"]["FullChecks"]["ItemProcessor"]["States"]["FullStart"]["Parameters"][
                "Payload"
            ],
            "taskToken.$",
            "token.$",
        ),
        "FullStart: passes 'token', which FullLaunch does not take",
    ),
    "a nested execution's input": (
        "promote",
        lambda d: _rename_key(
            d["States"]["BeforePromoteRun"]["Parameters"]["Input"], "run.$", "runRef.$"
        ),
        "BeforePromoteRun: passes 'runRef', which ExecutionInput does not take",
    ),
    "a catch's result path": (
        "promote",
        lambda d: d["States"]["Verify"]["Catch"][0].update(ResultPath="$.failure"),
        "Settle: passes 'failure', which PromoteState does not take",
    ),
}


@pytest.mark.parametrize("rename", sorted(RENAMES_IN_THE_MACHINES))
def test_a_field_renamed_in_a_machine_fails(rename: str) -> None:
    machine, edit, problem = RENAMES_IN_THE_MACHINES[rename]
    assert problem in _walk_edited(machine, edit)


class _RenamedOutcome(FullProgress):
    outcome: FinalOutcome | None = Field(default=None, alias="verdict")


class _RenamedGate(BaseModel):
    shut: bool


def test_a_field_renamed_in_a_contract_fails() -> None:
    full_start = Contract(TASKS["FullStartFunctionArn"].takes, _RenamedOutcome)
    renamed = {**TASKS, "FullStartFunctionArn": full_start}
    problems = walk_machine(_machine("receipt_run"), ExecutionInput, renamed)
    assert "FullFinished: $.outcome reads 'outcome', which is not in the contract" in problems


def test_a_pass_result_renamed_in_its_contract_fails() -> None:
    results: dict[str, type[BaseModel]] = {**PASS_RESULTS, "QuickGateCount": _RenamedGate}
    problems = walk_machine(_machine("receipt_run"), ExecutionInput, TASKS, results)
    assert "QuickGateCount: passes 'closed', which _RenamedGate does not take" in problems


def test_a_task_without_a_contract_fails() -> None:
    tasks = {k: v for k, v in TASKS.items() if k != "FinalizeFunctionArn"}
    problems = walk_machine(_machine("receipt_run"), ExecutionInput, tasks)
    assert "Finalize: FinalizeFunctionArn runs no step with a contract" in problems


def test_a_throttled_full_start_is_retried_with_backoff_by_its_error_name() -> None:
    """Lambda reports an exception by its class name: the Retry must name LaunchThrottled."""
    machine = json.loads((ROOT / "statemachine" / "receipt_run.asl.json").read_text())
    full_start = machine["States"]["FullChecks"]["ItemProcessor"]["States"]["FullStart"]
    [retry] = full_start["Retry"]
    assert LaunchThrottled.__name__ in retry["ErrorEquals"]
    assert retry["BackoffRate"] > 1
    assert retry["MaxAttempts"] >= 3
