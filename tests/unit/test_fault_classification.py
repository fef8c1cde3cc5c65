"""The crash-point campaign counts a port's writes by verb: every port method must be
classified, so a new write method cannot escape the campaign."""

from __future__ import annotations

import pytest
from forkhorse.ports.git import GitHost, GitStore, Snapshot
from forkhorse.ports.journal import PromoteJournal
from forkhorse.ports.store import Store
from forkhorse.ports.transparency import LogLedger

from tests.support.faults import (
    CrashPoint,
    FaultPlan,
    Faulty,
    InjectedFault,
    is_write,
    port_methods,
    unclassified,
)

PORTS = [Store, GitStore, Snapshot, GitHost, PromoteJournal, LogLedger]


@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_every_port_method_is_either_a_read_or_a_write(port: type) -> None:
    assert port_methods(port), "the port declares methods"
    assert unclassified(port) == []


def test_the_store_writes_are_the_state_changing_methods() -> None:
    writes = [name for name in port_methods(Store) if is_write(name)]
    assert "attach" in writes
    assert "put_record_chunks" in writes
    assert "settle_promotion" in writes
    assert "get_record_chunks" not in writes
    assert "open_promotion" not in writes
    assert "check_fence" not in writes


class _Port:
    def __init__(self) -> None:
        self.written: list[int] = []

    def put_value(self, value: int) -> int:
        self.written.append(value)
        return value

    def get_values(self) -> list[int]:
        return self.written


@pytest.mark.parametrize(("phase", "landed"), [("before", []), ("after", [1])])
def test_a_raise_mode_fault_fails_the_nth_write_before_or_after_it_lands(
    phase: str, landed: list[int]
) -> None:
    target = _Port()
    plan = FaultPlan(crash=CrashPoint(1, phase, "raise"), armed=True)  # type: ignore[arg-type]
    port = Faulty(target, plan)
    assert port.put_value(0) == 0
    with pytest.raises(InjectedFault):
        port.put_value(1)
    assert port.put_value(2) == 2, "a plan fires once"
    assert port.get_values() == [0, *landed, 2]
    assert plan.writes == ["_Port.put_value"] * 3, "reads are not counted"
