"""The ContainerPort contract on real podman: preflight, refusals, destroy, orphans."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from forkhorse.adapters.containers.common import DEPLOYMENT_LABEL, container_name
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman
from forkhorse.adapters.containers.removal_log import RemovalLog
from forkhorse.ports.containers import (
    CleanupUnconfirmed,
    ContainerHandle,
    ContainerRefused,
    ContainerStartFailed,
    ImageUnresolved,
)

from tests.integration.containers.helpers import (
    RunCheck,
    containers_of,
    new_execution,
    spec_for,
    wait_until_done,
)
from tests.support.containers import IMAGE_HOME

pytestmark = pytest.mark.podman
DIGEST = "sha256:" + "ab" * 32


def port_containers(podman: Podman, port: PodmanContainerPort) -> list[str]:
    """The containers of this port's deployment: other processes on the machine may run
    their own at the same time."""
    listed = podman.output(
        "ps", "-a", "--filter", f"label={DEPLOYMENT_LABEL}={port.deployment}", "--format", "json"
    )
    return [item["Id"] for item in json.loads(listed)]


def port_with_images(tmp_path: Path, podman: Podman, images: dict[str, str]) -> PodmanContainerPort:
    registry = ImageRegistry(tmp_path / "deployment")
    registry.path.parent.mkdir(parents=True, exist_ok=True)
    registry.path.write_text(json.dumps(images))
    return PodmanContainerPort(tmp_path / "state", registry, podman)


# --- preflight ---------------------------------------------------------------------------


def test_preflight_resolves_a_configured_name_to_its_digest(
    port: PodmanContainerPort, busybox_ref: str
) -> None:
    assert port.preflight("busybox") == busybox_ref
    assert "@sha256:" in busybox_ref


@pytest.mark.parametrize(
    "reference",
    [
        "localhost/forkhorse/busybox:latest",  # a mutable tag
        "localhost/forkhorse/busybox",  # no tag, no digest
        "localhost/forkhorse/busybox@sha256:abc",  # a truncated digest
        f"localhost/forkhorse/busybox@{DIGEST}",  # pinned, but no such image here
        f"localhost/forkhorse/busybox:latest@{DIGEST.upper()}",
    ],
)
def test_preflight_refuses_mutable_or_unresolved_references(
    tmp_path: Path, podman: Podman, reference: str
) -> None:
    port = port_with_images(tmp_path, podman, {"default": reference})
    with pytest.raises(ImageUnresolved):
        port.preflight("default")
    assert port_containers(podman, port) == []  # no container started


def test_preflight_refuses_unknown_names_and_a_corrupt_registry(
    tmp_path: Path, podman: Podman, port: PodmanContainerPort
) -> None:
    with pytest.raises(ImageUnresolved):
        port.preflight("node:latest")
    corrupt = port_with_images(tmp_path, podman, {})
    ImageRegistry(tmp_path / "deployment").path.write_text("[1, 2")
    with pytest.raises(ImageUnresolved):
        corrupt.preflight("default")


def test_a_spec_with_a_mutable_reference_cannot_be_built(checkout: Path) -> None:
    with pytest.raises(ImageUnresolved):
        spec_for("localhost/forkhorse/busybox:latest", "true", checkout)


# --- start, collect, destroy -------------------------------------------------------------


def test_a_passing_check_gives_its_exit_code_streams_and_duration(run_check: RunCheck) -> None:
    started = time.monotonic()
    attempt = run_check("cat README.md; echo oops >&2; ls src; id -u")
    wall_ms = (time.monotonic() - started) * 1000
    result = attempt.result
    assert (result.outcome, result.exit_code, result.message) == (
        "passed",
        0,
        "Exited with code 0.",
    )
    assert result.stdout.text == "hello\nmain.js\n1000\n"
    assert result.stderr.text == "oops\n"
    assert 0 < result.duration_ms <= wall_ms  # the container's own time, within the call's


def test_a_non_zero_exit_fails(run_check: RunCheck) -> None:
    attempt = run_check("exit 42")
    assert (attempt.result.outcome, attempt.result.exit_code) == ("failed", 42)
    assert attempt.result.message == "Exited with code 42."


@pytest.mark.parametrize(
    ("code", "outcome"),
    [(3, "failed"), (126, "failed"), (127, "failed"), (125, "infrastructure-error")],
)
def test_an_exit_code_is_the_one_podman_run_reports(
    run_check: RunCheck, code: int, outcome: str
) -> None:
    """`podman run` exits with the container's code; 125 is its own failure, so a check that
    exits 125 can only mislabel its own failure (never as a pass)."""
    result = run_check(f"exit {code}").result
    assert result.outcome == outcome
    assert result.exit_code == (None if code == 125 else code)


def test_wait_returns_when_the_container_ends_and_not_before(
    port: PodmanContainerPort, busybox_ref: str, checkout: Path
) -> None:
    quick = port.start(spec_for(busybox_ref, "true", checkout))
    slow = port.start(spec_for(busybox_ref, "sleep 60", checkout, check="slow"))
    try:
        assert port.wait(quick, 60)
        assert port.poll(quick) == "exited"
        assert not port.wait(slow, 0.2)
        assert port.poll(slow) == "running"
    finally:
        port.destroy(quick)
        port.destroy(slow)


def test_the_command_runs_with_sh_c_exactly(run_check: RunCheck) -> None:
    attempt = run_check("echo \"$0\" '$HOME' $HOME; pwd")
    assert attempt.result.stdout.text == "sh $HOME /tmp\n/workspace\n"


def test_a_second_container_for_the_same_execution_and_check_is_refused(
    tmp_path: Path, podman: Podman, port: PodmanContainerPort, busybox_ref: str, checkout: Path
) -> None:
    execution = new_execution()
    first = port.start(spec_for(busybox_ref, "sleep 60", checkout, execution=execution))
    try:
        with pytest.raises(ContainerRefused):
            port.start(spec_for(busybox_ref, "true", checkout, execution=execution))
        # Another process (a fresh port, e.g. after a restart) is refused by podman itself.
        other = PodmanContainerPort(tmp_path / "other", ImageRegistry(IMAGE_HOME), podman)
        with pytest.raises(ContainerRefused):
            other.start(spec_for(busybox_ref, "true", checkout, execution=execution))
        assert containers_of(podman, execution) == [first.container_id]
        # A different check of the same execution is fine.
        sibling = port.start(
            spec_for(busybox_ref, "true", checkout, execution=execution, check="b")
        )
        port.destroy(sibling)
    finally:
        port.destroy(first)
    assert containers_of(podman, execution) == []


def test_a_container_is_never_reused(
    podman: Podman, port: PodmanContainerPort, busybox_ref: str, checkout: Path
) -> None:
    spec = spec_for(busybox_ref, "echo once", checkout)
    handle = port.start(spec)
    wait_until_done(port, handle)
    assert port.collect(handle).outcome == "passed"
    port.destroy(handle)
    with pytest.raises(ContainerRefused):
        port.poll(handle)
    with pytest.raises(ContainerRefused):
        port.collect(handle)
    with pytest.raises(ContainerRefused):
        port.start(spec)
    assert containers_of(podman, spec.execution) == []


def test_destroy_mid_run_kills_and_removes_everything(
    tmp_path: Path, podman: Podman, port: PodmanContainerPort, busybox_ref: str, checkout: Path
) -> None:
    spec = spec_for(busybox_ref, "sleep 60", checkout)
    handle = port.start(spec)
    assert port.poll(handle) == "running"
    port.destroy(handle)
    assert containers_of(podman, spec.execution) == []
    assert not (tmp_path / "state" / "runs" / container_name(spec.execution, "probe")).exists()
    port.destroy(handle)  # destroying again is confirmed and harmless


class StubbornPodman(Podman):
    """A podman whose `rm` silently does nothing: the container is still there."""

    def run(
        self, *args: str, stdin: bytes | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        if args and args[0] == "rm":
            return subprocess.CompletedProcess(list(args), 0, b"", b"")
        return super().run(*args, stdin=stdin, timeout=timeout)


def _fails_closed(
    stubborn: PodmanContainerPort,
    handle: ContainerHandle,
    execution: str,
    tmp_path: Path,
    podman: Podman,
) -> None:
    """Destroy refuses to confirm, the container is still there; a real port removes it."""
    try:
        with pytest.raises(CleanupUnconfirmed):
            stubborn.destroy(handle)
        assert containers_of(podman, execution) == [handle.container_id]
    finally:
        PodmanContainerPort(tmp_path / "state", ImageRegistry(IMAGE_HOME), podman).destroy(handle)


def test_cleanup_that_cannot_be_confirmed_fails_closed(
    tmp_path: Path, podman: Podman, busybox_ref: str, checkout: Path
) -> None:
    stubborn = PodmanContainerPort(tmp_path / "state", ImageRegistry(IMAGE_HOME), StubbornPodman())
    spec = spec_for(busybox_ref, "sleep 60", checkout)
    handle = stubborn.start(spec)
    _fails_closed(stubborn, handle, spec.execution, tmp_path, podman)
    assert containers_of(podman, spec.execution) == []


class CountingPodman(Podman):
    """Records each podman command it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, ...]] = []

    def run(
        self, *args: str, stdin: bytes | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        self.calls.append(args)
        return super().run(*args, stdin=stdin, timeout=timeout)


def _run_to_destroy(port: PodmanContainerPort, busybox_ref: str, checkout: Path) -> str:
    spec = spec_for(busybox_ref, "true", checkout)
    handle = port.start(spec)
    assert wait_until_done(port, handle) == "exited"
    assert port.collect(handle).outcome == "passed"
    port.destroy(handle)
    return spec.execution


def test_podmans_own_removal_event_confirms_cleanup_without_another_podman_call(
    tmp_path: Path, podman: Podman, busybox_ref: str, checkout: Path
) -> None:
    counting = CountingPodman()
    port = PodmanContainerPort(tmp_path / "state", ImageRegistry(IMAGE_HOME), counting)
    execution = _run_to_destroy(port, busybox_ref, checkout)
    assert counting.calls == []
    assert containers_of(podman, execution) == []


def test_without_podmans_event_log_cleanup_is_confirmed_by_asking_podman(
    tmp_path: Path, podman: Podman, busybox_ref: str, checkout: Path
) -> None:
    counting = CountingPodman()
    unread = RemovalLog(tmp_path / "no-events.log")
    registry = ImageRegistry(IMAGE_HOME)
    port = PodmanContainerPort(tmp_path / "state", registry, counting, None, unread)
    execution = _run_to_destroy(port, busybox_ref, checkout)
    assert [call[:2] for call in counting.calls] == [("container", "exists")]
    assert containers_of(podman, execution) == []


def test_a_removal_log_others_could_write_confirms_nothing(
    tmp_path: Path, podman: Podman, busybox_ref: str, checkout: Path
) -> None:
    """A forged `remove` line for a live container, in a log anyone may write: cleanup still
    asks podman, finds the container, and fails closed."""
    forged = tmp_path / "events.log"
    forged.write_bytes(b"")
    removals = RemovalLog(forged)
    stubborn = PodmanContainerPort(
        tmp_path / "state", ImageRegistry(IMAGE_HOME), StubbornPodman(), None, removals
    )
    spec = spec_for(busybox_ref, "sleep 60", checkout)
    handle = stubborn.start(spec)
    line = {"ID": handle.container_id, "Status": "remove", "Type": "container"}
    forged.write_text(json.dumps(line) + "\n")
    forged.chmod(0o666)
    _fails_closed(stubborn, handle, spec.execution, tmp_path, podman)


def test_start_needs_a_checkout_directory(
    port: PodmanContainerPort, busybox_ref: str, tmp_path: Path
) -> None:
    with pytest.raises(ContainerStartFailed):
        port.start(spec_for(busybox_ref, "true", tmp_path / "missing"))


# --- orphans -----------------------------------------------------------------------------


def test_orphans_of_dead_executions_are_removed_by_label(
    tmp_path: Path, podman: Podman, busybox_ref: str, checkout: Path
) -> None:
    def port_at(state: str) -> PodmanContainerPort:
        return PodmanContainerPort(tmp_path / state, ImageRegistry(IMAGE_HOME), podman)

    before_restart, elsewhere = port_at("state"), port_at("another-deployment")
    live, dead = new_execution(), new_execution()
    live_handle = before_restart.start(spec_for(busybox_ref, "sleep 60", checkout, execution=live))
    before_restart.start(spec_for(busybox_ref, "sleep 60", checkout, execution=dead))
    neighbour = elsewhere.start(
        spec_for(busybox_ref, "sleep 60", checkout, execution=dead, check="n")
    )
    stranger = podman.output(
        "create", *ULIMIT_FLAGS, "--label", "forkhorse.execution=" + dead, busybox_ref, "true"
    ).strip()  # carries a Forkhorse-like label but belongs to no deployment
    try:
        removed = port_at("state").cleanup_orphans(frozenset({live}))
        assert len(removed) == 1
        assert sorted(containers_of(podman, dead)) == sorted([stranger, neighbour.container_id])
        assert containers_of(podman, live) == [live_handle.container_id]
        runs = sorted(path.name for path in (tmp_path / "state" / "runs").iterdir())
        assert runs == [container_name(live, "probe")]
    finally:
        podman.run("rm", "-f", stranger)
        port_at("state").cleanup_orphans(frozenset())
        port_at("another-deployment").cleanup_orphans(frozenset())
    assert containers_of(podman, live) == containers_of(podman, dead) == []
    assert list((tmp_path / "state" / "runs").iterdir()) == []
