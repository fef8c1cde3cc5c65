"""The `forkhorse` command's start-up (issue 29): git runs `forkhorse git-credential get` on
every call, and agents run `forkhorse status` between steps. Each must cost at most 6 times
a bare `python -c pass` of the same interpreter (CPU, medians of fresh processes, both
measured in this run); the figure is the slower command's ratio."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench import BenchFigures

pytestmark = pytest.mark.bench

ROUNDS = 9
CREDENTIAL_REQUEST = "protocol=http\nhost=127.0.0.1:8787\n\n"
PROFILE = '[profiles.default]\nurl = "http://127.0.0.1:8787"\ntoken = "fh_bench"\n'


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu(command: list[str], env: dict[str, str], stdin: str = "") -> float:
    before = _children_cpu()
    subprocess.run(command, input=stdin, text=True, env=env, check=True, capture_output=True)
    return _children_cpu() - before


def test_the_cli_starts_within_six_bare_interpreters(
    bench_figures: BenchFigures, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORKHORSE_")}
    # An agent's profile, as `forkhorse login` writes it: the helper reads it and answers.
    env["HOME"] = str(tmp_path)
    env.pop("XDG_CONFIG_HOME", None)
    profile = tmp_path / ".config" / "forkhorse" / "config.toml"
    profile.parent.mkdir(parents=True)
    profile.write_text(PROFILE)
    # An installed package has its bytecode: let the warm-up runs write what is stale.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    script = Path(sys.executable).with_name("forkhorse")
    forkhorse = [str(script)] if script.exists() else [sys.executable, "-m", "forkhorse.cli"]
    for warm_up in ([*forkhorse, "status", "--help"], [*forkhorse, "git-credential", "get"]):
        _cpu(warm_up, env, CREDENTIAL_REQUEST)
    bare = statistics.median(_cpu([sys.executable, "-c", "pass"], env) for _ in range(ROUNDS))
    status = statistics.median(_cpu([*forkhorse, "status", "--help"], env) for _ in range(ROUNDS))
    credential = statistics.median(
        _cpu([*forkhorse, "git-credential", "get"], env, CREDENTIAL_REQUEST) for _ in range(ROUNDS)
    )
    answered = subprocess.run(
        [*forkhorse, "git-credential", "get"],
        input=CREDENTIAL_REQUEST,
        text=True,
        env=env,
        capture_output=True,
        check=True,
    )
    assert "password=fh_bench" in answered.stdout  # the measured helper did answer
    ratio = max(status, credential) / bare
    print(
        f"\nforkhorse status --help {status * 1000:.0f} ms, git-credential get "
        f"{credential * 1000:.0f} ms, bare python {bare * 1000:.0f} ms CPU: {ratio:.1f}x"
    )
    bench_figures.record("cli-startup", ratio)
