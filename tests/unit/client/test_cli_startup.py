"""`forkhorse` is git's credential helper, so it runs on every git call: parsing a client
command loads no library it does not use (counted in sys.modules, not timed; `make bench`
times it). Without the `client` extra the service's commands still work and the client's
name the extra. A usage error exits 3, as the README's exit codes say."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# What parsing a client command must not execute: the service, its models, AWS, git, HTTP.
HEAVY = ("boto3", "botocore", "dulwich", "httpx", "pydantic", "aws_lambda_powertools",
         "aws_xray_sdk", "securesystemslib", "cryptography", "mcp", "forkhorse.service",
         "forkhorse.api", "forkhorse.domain", "forkhorse.wiring", "forkhorse.adapters")  # fmt: skip

# Runs `forkhorse ARGS` in this interpreter, then lists the modules that were executed
# (a module the client imports lazily is in sys.modules unexecuted until first used).
PROBE = """
import contextlib, io, json, sys
from forkhorse.cli import main
code = None
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as stop:
        code = stop.code
executed = sorted(
    name for name, module in sys.modules.items()
    if module is not None and not type(module).__name__ == "_LazyModule"
)
print(json.dumps({"code": code, "modules": executed}))
"""

# A sitecustomize that makes the client extra's packages uninstalled.
WITHOUT_CLIENT_EXTRA = """
import importlib.abc, sys

class _Uninstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("httpx", "mcp"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Uninstalled())
"""


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORKHORSE_")}
    env["HOME"] = str(tmp_path)  # no profile of the developer's
    env["XDG_CONFIG_HOME"] = str(tmp_path / ".config")
    return env


def _loaded(tmp_path: Path, *args: str, stdin: str = "") -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        env=_isolated_env(tmp_path),
    )
    found = json.loads(done.stdout.splitlines()[-1])
    return found["code"], found["modules"]


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("git-credential", "get"), "protocol=http\nhost=127.0.0.1:8787\n\n"),
        (("status", "--help"), ""),
        (("submit", "--help"), ""),
        (("verify-log", "--help"), ""),
    ],
)
def test_a_client_command_parses_without_loading_anything_heavy(
    tmp_path: Path, args: tuple[str, ...], stdin: str
) -> None:
    code, modules = _loaded(tmp_path, *args, stdin=stdin)
    assert code == 0
    assert [name for name in modules if name.startswith(HEAVY)] == []
    # Of the package: the command module, the client's light modules and nothing else.
    ours = [name for name in modules if name.startswith("forkhorse")]
    assert len(ours) <= 10, ours


def _without_extra(
    tmp_path: Path, *args: str, module: str = "forkhorse.cli"
) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(WITHOUT_CLIENT_EXTRA)
    env = _isolated_env(tmp_path) | {"PYTHONPATH": str(site)}
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_without_the_client_extra_the_service_commands_still_run(tmp_path: Path) -> None:
    blocked = _without_extra(tmp_path, module="httpx")  # the blocker itself works
    assert blocked.returncode == 1
    assert "No module named 'httpx'" in blocked.stderr
    for args in (("--help",), ("serve", "--help"), ("status", "--help")):
        done = _without_extra(tmp_path, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert "usage: forkhorse" in done.stdout


@pytest.mark.parametrize("args", [("status",), ("mcp",), ("gate", "REVIEW")])
def test_without_the_client_extra_a_client_command_names_the_extra(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = _without_extra(tmp_path, *args)
    assert done.returncode == 3, done.stderr
    assert "pip install 'forkhorse[client]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_usage_error_exits_3_and_the_help_hides_nothing(tmp_path: Path) -> None:
    env = _isolated_env(tmp_path)
    run = [sys.executable, "-m", "forkhorse.cli"]
    missing = subprocess.run([*run, "submit"], capture_output=True, text=True, env=env)
    assert missing.returncode == 3
    assert "--packet" in missing.stderr
    unknown = subprocess.run(
        [*run, "wait", "--bogus", "R"], capture_output=True, text=True, env=env
    )
    assert unknown.returncode == 3
    top = subprocess.run([*run, "--help"], capture_output=True, text=True, env=env, check=True)
    assert "SUPPRESS" not in top.stdout
    assert "git-credential" in top.stdout


def test_each_command_module_registers_the_commands_the_table_names() -> None:
    from forkhorse import cli

    for module, commands in cli.COMMANDS_OF.items():
        parser = cli.build_parser((module,))
        [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert set(subparsers.choices) == commands, module


def test_gate_review_is_the_review_gate_and_gate_check_stays_flow_next(tmp_path: Path) -> None:
    code, modules = _loaded(tmp_path, "gate", "REVIEW", "--help")
    assert code == 0
    assert "forkhorse.client.cli" in modules
    code, modules = _loaded(tmp_path, "gate", "check", "--help")
    assert code == 0
    # Flow-Next's commands load flow and the domain's limits it shares, nothing of the rest.
    rest = tuple(name for name in HEAVY if name != "forkhorse.domain")
    assert "forkhorse.serve" not in modules
    assert [name for name in modules if name.startswith(rest)] == []
