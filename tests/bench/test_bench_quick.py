"""Quick-check benchmark: spawn to verdict, as a ratio against a bare interpreter start.

Both are measured in the same run on the same machine: the bare baseline is
`python3 -I -S -c pass` with the very interpreter the sandbox runs, or `node -e 0` with the
very `node` that runs JavaScript checks.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dulwich.repo import Repo
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.adapters.sandbox.runtime import current_runtime, node_runtime
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.ports.git import Snapshot

ROUNDS = 40
TARGET_RATIO = 2.5
# The target is reported; the assertion only guards against regressions, because a shared
# 2-core CI machine under load can swing a 20 ms measurement by several milliseconds.
REGRESSION_RATIO = 4.0
REPO_ROOT = Path(__file__).resolve().parents[2]
MINIMAL = "def check(ctx):\n    return {'ok': ctx.read('brand.json') is not None}\n"
MINIMAL_JS = 'export default async (ctx) => ({ ok: (await ctx.read("brand.json")) !== null });\n'


def _snapshot(tmp_path: Path) -> Snapshot:
    work = tmp_path / "work"
    (work / ".forkhorse/quick").mkdir(parents=True)
    (work / "brand.json").write_text((REPO_ROOT / "brand.json").read_text())
    (work / ".forkhorse/quick/brand.py").write_text(
        (REPO_ROOT / "examples/quick/brand.py").read_text()
    )
    (work / ".forkhorse/quick/brand.js").write_text(
        (REPO_ROOT / ".forkhorse/quick/brand.js").read_text()
    )
    (work / ".forkhorse/quick/minimal.py").write_text(MINIMAL)
    (work / ".forkhorse/quick/minimal.js").write_text(MINIMAL_JS)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(work),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.com",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.com",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=work, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    store = DiskGitHost(tmp_path / "state").store("bench")
    with Repo(str(work)) as repo:
        store.objects.add_objects([(repo.object_store[s], None) for s in repo.object_store])
    return store.open_snapshot(sha)


def _interleaved_medians(actions: list[Callable[[], object]], rounds: int) -> list[float]:
    """Median seconds of each action, run in turn each round so all see the same machine load."""
    timings: list[list[float]] = [[] for _ in actions]
    for _ in range(rounds):
        for action, samples in zip(actions, timings, strict=True):
            started = time.perf_counter()
            action()
            samples.append(time.perf_counter() - started)
    return [statistics.median(samples) for samples in timings]


def _bare_start() -> None:
    executable = current_runtime().executable
    subprocess.run([executable, "-I", "-S", "-c", "pass"], check=True)


def _bare_node_start() -> None:
    subprocess.run([node_runtime().executable, "-e", "0"], check=True)


# Per module extension: how the bare baseline is started, and what it is called.
BARE_STARTS: dict[str, tuple[str, Callable[[], None]]] = {
    "py": ("python3 -I -S -c pass", _bare_start),
    "js": ("node -e 0", _bare_node_start),
}


def _one_against_bare(tmp_path: Path, extension: str) -> tuple[float, float, float]:
    """Median seconds of a bare start, a minimal quick check and the brand check."""
    snapshot = _snapshot(tmp_path)
    sandbox = BwrapSandbox()
    minimal = QuickCheckDef(name="minimal", module=f".forkhorse/quick/minimal.{extension}")
    brand = QuickCheckDef(name="brand", module=f".forkhorse/quick/brand.{extension}")
    assert sandbox.run_check(snapshot, minimal).outcome == "passed"  # warm caches once
    bare, one, brand_one = _interleaved_medians(
        [
            BARE_STARTS[extension][1],
            lambda: sandbox.run_check(snapshot, minimal),
            lambda: sandbox.run_check(snapshot, brand),
        ],
        ROUNDS,
    )
    print(
        f"\nbare {BARE_STARTS[extension][0]}: {bare * 1000:.1f} ms (median of {ROUNDS})"
        f"\none .{extension} quick check, spawn to verdict: {one * 1000:.1f} ms -> ratio"
        f" {one / bare:.2f}x (target <= {TARGET_RATIO}x); {1000 - one * 1000:.0f} ms under"
        f" one second\nthe repository's brand.{extension} check: {brand_one * 1000:.1f} ms"
        f" -> ratio {brand_one / bare:.2f}x"
    )
    return bare, one, brand_one


@pytest.mark.bench
@pytest.mark.sandbox
def test_one_quick_check_against_a_bare_interpreter(tmp_path: Path) -> None:
    bare, one, brand_one = _one_against_bare(tmp_path, "py")
    assert one / bare <= REGRESSION_RATIO
    assert one < 0.25
    assert brand_one < 1.0


@pytest.mark.bench
@pytest.mark.sandbox
def test_one_javascript_quick_check_against_a_bare_node(tmp_path: Path) -> None:
    bare, one, brand_one = _one_against_bare(tmp_path, "js")
    assert one / bare <= REGRESSION_RATIO
    assert brand_one < 1.0


@pytest.mark.bench
@pytest.mark.sandbox
@pytest.mark.parametrize("extension", list(BARE_STARTS))
def test_a_suite_of_ten_quick_checks(tmp_path: Path, extension: str) -> None:
    snapshot = _snapshot(tmp_path)
    sandbox = BwrapSandbox()
    module = f".forkhorse/quick/brand.{extension}"
    checks = [QuickCheckDef(name=f"brand-{index}", module=module) for index in range(10)]
    bare_start = BARE_STARTS[extension][1]

    def suite() -> None:
        assert all(sandbox.run_check(snapshot, check).outcome == "passed" for check in checks)

    def ten_bare_starts() -> None:
        for _ in range(10):
            bare_start()

    ten_bare, total = _interleaved_medians([ten_bare_starts, suite], rounds=5)
    print(
        f"\nsuite of 10 quick checks (brand.{extension}), in order: {total * 1000:.0f} ms"
        f" ({total * 100:.1f} ms per check; 10 bare starts: {ten_bare * 1000:.0f} ms,"
        f" ratio {total / ten_bare:.2f}x)"
    )
    assert total < 10.0
