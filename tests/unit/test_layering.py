"""The layering rule sees every leak: the contracts in pyproject.toml hold on the package,
and break on a copy of it with one leak planted (a use case importing the runner, boto3 in
a use case, the client loading the service). The package has no import cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "forkhorse" / "forkhorse"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

LAYERS = "the package is layered: each layer imports only the layers below it"
NO_AWS = "domain, ports, use cases, runner and their bodies import no AWS, dulwich or"
CLIENT = "the client loads nothing of the service"


def _lint(package_parent: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=package_parent,
        env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A copy of the package to plant leaks in."""
    shutil.copytree(PACKAGE, tmp_path / "forkhorse", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _plant(parent: Path, module: str, source: str) -> None:
    (parent / "forkhorse" / module).write_text(source, encoding="utf-8")


def test_the_package_keeps_every_contract(planted: Path) -> None:
    linted = _lint(planted)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "0 broken" in linted.stdout


@pytest.mark.parametrize(
    ("module", "source", "contract", "named"),
    [
        (
            "service/leak.py",
            "from forkhorse.runner.workflow import steps\n",
            LAYERS,
            "forkhorse.service is not allowed to import forkhorse.runner",
        ),
        (
            "service/leak.py",
            "import boto3\n",
            NO_AWS,
            "forkhorse.service is not allowed to import boto3",
        ),
        (
            "domain/leak.py",
            "import sqlite3\n",
            NO_AWS,
            "forkhorse.domain is not allowed to import sqlite3",
        ),
        (
            "runner/workflow/leak.py",
            "from forkhorse.runner.local import supervisor\n",
            "runner: local drives, upkeep cleans up, workflow is the step logic",
            "forkhorse.runner.workflow is not allowed to import forkhorse.runner.local",
        ),
        (
            "client/leak.py",
            "from forkhorse.service import facade\n",
            CLIENT,
            "forkhorse.client is not allowed to import forkhorse.service",
        ),
        (
            "api/leak.py",
            "from forkhorse.adapters.sqlite import SqliteStore\n",
            LAYERS,
            "forkhorse.api is not allowed to import forkhorse.adapters",
        ),
    ],
)
def test_a_planted_leak_breaks_its_contract(
    planted: Path, module: str, source: str, contract: str, named: str
) -> None:
    _plant(planted, module, source)
    linted = _lint(planted)
    assert linted.returncode != 0
    broken = linted.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, linted.stdout
    assert named in " ".join(broken.split()), linted.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return found


def test_the_package_has_no_import_cycle() -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    graph = grimp.build_graph("forkhorse", cache_dir=None)
    assert _cycles(graph) == []


def test_a_planted_cycle_is_found(planted: Path) -> None:
    """The cycle finder can fail: two modules importing each other are reported."""
    _plant(planted, "flow/ping.py", "from forkhorse.flow import pong\n")
    _plant(planted, "flow/pong.py", "from forkhorse.flow import ping\n")
    script = (
        "import grimp, json, sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.unit.test_layering import _cycles;"
        "print(json.dumps(_cycles(grimp.build_graph('forkhorse', cache_dir=None))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", script, str(planted)],
        cwd=ROOT,
        env={"PYTHONPATH": f"{planted}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert '["forkhorse.flow.ping", "forkhorse.flow.pong"]' in found.stdout
