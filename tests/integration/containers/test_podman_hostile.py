"""Hostile full checks in real podman containers: each gets the right outcome, leaves no
container behind (`run_check` asserts it), and could not pass by accident."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from forkhorse.domain.logs import LOG_BUDGET_BYTES

from tests.integration.containers.helpers import RunCheck, host_processes_with

pytestmark = pytest.mark.podman


class CountingListener:
    """A TCP listener on the host's loopback that counts the connections it accepts."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


def test_the_network_is_unreachable(run_check: RunCheck) -> None:
    listener = CountingListener()
    try:
        # Reaching the host's loopback listener would exit 0 and pass.
        attempt = run_check(
            f"if nc -w 2 127.0.0.1 {listener.port} </dev/null; then echo CONNECTED; exit 0; fi; "
            "ls /sys/class/net; exit 7"
        )
    finally:
        listener.close()
    assert attempt.result.outcome == "failed"
    assert attempt.result.exit_code == 7
    assert "CONNECTED" not in attempt.result.stdout.text
    assert attempt.result.stdout.text.split() == ["lo"]  # no interface but loopback
    assert listener.accepted == 0


def test_the_root_filesystem_is_read_only(run_check: RunCheck) -> None:
    attempt = run_check(
        "for target in /etc/owned /owned /bin/owned /usr/owned /var/owned /root/owned; do "
        "if echo x > $target; then echo WROTE $target; exit 0; fi; done; exit 9"
    )
    assert attempt.result.outcome == "failed"
    assert attempt.result.exit_code == 9
    assert "WROTE" not in attempt.result.stdout.text
    assert "Read-only file system" in attempt.result.stderr.text


def test_workspace_writes_stay_in_the_per_run_copy(
    run_check: RunCheck, checkout: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "host-secret.txt"
    outside.write_text("untouched\n")
    (checkout / "escape").symlink_to(outside)  # a link out of the checkout, to a host file
    attempt = run_check(
        "(echo via-link > escape) 2>/dev/null; "
        "echo changed > README.md && rm src/main.js && echo new > added.txt "
        "&& echo scratch > /tmp/scratch && cat README.md"
    )
    assert attempt.result.outcome == "passed"
    assert attempt.result.stdout.text == "changed\n"
    assert (checkout / "README.md").read_text() == "hello\n"
    assert (checkout / "src" / "main.js").exists()
    assert not (checkout / "added.txt").exists()
    assert outside.read_text() == "untouched\n"  # the link resolved inside the container


def test_a_check_writing_into_its_checkout_cannot_affect_the_next_check(
    run_check: RunCheck, checkout: Path
) -> None:
    """The run's checks share one export: each writes only to its own overlay."""
    vandal = run_check(
        "echo changed > README.md && rm -r src && mkdir -p build && echo out > build/o "
        "&& chmod 000 . && echo done"
    )
    assert (vandal.result.outcome, vandal.result.stdout.text) == ("passed", "done\n")
    after = run_check("cat README.md; ls; ls build 2>&1 | head -c 0; id -u")
    assert after.result.outcome == "passed"
    assert after.result.stdout.text == "hello\nREADME.md\nsrc\n1000\n"
    assert (checkout / "README.md").read_text() == "hello\n"
    assert (checkout / "src" / "main.js").exists()
    assert not (checkout / "build").exists()


def test_a_fork_bomb_hits_the_pids_limit_and_fails(run_check: RunCheck) -> None:
    # Without a pids limit this loop would finish and exit 0.
    attempt = run_check(
        "i=0; while [ $i -lt 100000 ]; do sleep 4242 & i=$((i+1)); done; echo FINISHED; exit 0",
        timeout=30,
    )
    assert attempt.result.outcome == "failed"
    assert "FINISHED" not in attempt.result.stdout.text
    assert "can't fork" in attempt.result.stderr.text
    assert host_processes_with("sleep 4242") == []


def test_a_recursive_fork_bomb_times_out_and_is_fully_killed(run_check: RunCheck) -> None:
    # The sleeper and the bomb's one subshell are forked before the bomb starts, and the
    # sleeper is awaited with a builtin, so the shell never forks once the bomb runs (a
    # pipeline started by the shell itself forks once per side: on a loaded machine its
    # second fork could meet the pids limit and end the shell): it outlives its deadline.
    attempt = run_check(
        "sleep 4343 & sleeper=$!; bomb() { bomb | bomb & }; (bomb) & wait $sleeper", timeout=3
    )
    assert attempt.state == "timed-out"
    assert attempt.result.outcome == "timed-out"
    assert attempt.seconds >= 3
    assert host_processes_with("sleep 4343") == []
    # The machine still runs containers afterwards.
    assert run_check("echo alive").result.stdout.text == "alive\n"


@pytest.mark.parametrize(("exit_code", "outcome"), [(0, "passed"), (1, "failed")])
def test_ten_megabytes_of_output_is_bounded(
    run_check: RunCheck, exit_code: int, outcome: str
) -> None:
    attempt = run_check(
        "head -c 10000000 /dev/zero | tr '\\0' o; head -c 10000000 /dev/zero | tr '\\0' e >&2; "
        f"echo; echo END; exit {exit_code}"
    )
    result = attempt.result
    assert result.outcome == outcome
    assert result.exit_code == exit_code
    for stream, size in ((result.stdout, 10_000_005), (result.stderr, 10_000_000)):
        assert stream.total_bytes == size
        assert len(stream.text.encode()) <= LOG_BUDGET_BYTES
        assert stream.dropped_bytes == size - LOG_BUDGET_BYTES
    assert result.stdout.text.endswith("o\nEND\n")  # the tail is kept


def test_sleeping_past_the_timeout_is_killed_and_timed_out(run_check: RunCheck) -> None:
    attempt = run_check("sleep 4444; exit 0", timeout=2)
    assert attempt.state == "timed-out"
    assert attempt.result.outcome == "timed-out"
    assert attempt.result.message == "Timed out after 2 s."
    assert attempt.seconds >= 2  # a deadline never fires early
    assert host_processes_with("sleep 4444") == []


def test_no_late_result_turns_a_timeout_into_a_pass(run_check: RunCheck) -> None:
    # Exits 0 one second after its deadline; by then it has been killed.
    attempt = run_check("sleep 2; exit 0", timeout=1)
    time.sleep(1.5)
    assert attempt.result.outcome == "timed-out"


@pytest.mark.parametrize(("exit_code", "outcome"), [(0, "passed"), (3, "failed")])
def test_background_processes_die_with_the_check(
    run_check: RunCheck, exit_code: int, outcome: str
) -> None:
    attempt = run_check(
        "sleep 4545 & (sleep 4545 &) ; setsid sleep 4545 & nohup sleep 4545 >/dev/null 2>&1 & "
        f"echo left-behind; exit {exit_code}",
        timeout=60,
    )
    assert attempt.result.outcome == outcome
    assert attempt.result.exit_code == exit_code
    # It ended with its command, not with its children (they would have run into the timeout).
    assert attempt.state != "timed-out"
    assert host_processes_with("sleep 4545") == []


def test_memory_is_limited(run_check: RunCheck) -> None:
    # Holding 2 GB in a shell variable needs more than the 1 GiB limit.
    attempt = run_check("x=$(head -c 2000000000 /dev/zero | tr '\\0' x); echo HELD; exit 0")
    assert attempt.result.outcome == "failed"
    assert "HELD" not in attempt.result.stdout.text
