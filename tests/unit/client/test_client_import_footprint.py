"""Agents install and run the client alone: importing any client module, or running a client
command, loads neither the service, the signing code, the runner, the adapters nor any AWS or
git library (each would also cost a share of a second per command)."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import forkhorse.client
import pytest
from forkhorse.client.exits import EXIT_USAGE

FORBIDDEN = ("forkhorse.service", "forkhorse.attest", "forkhorse.adapters", "forkhorse.runner",
             "forkhorse.wiring", "boto3", "botocore", "aws_lambda_powertools", "aws_xray_sdk",
             "securesystemslib", "dulwich")  # fmt: skip

CLIENT_MODULES = [
    "forkhorse.client",
    *(f"forkhorse.client.{m.name}" for m in pkgutil.iter_modules(forkhorse.client.__path__)),
    "forkhorse.cli",
]

# Runs CODE in a fresh interpreter and prints each forbidden module loaded, with the line of
# the package that imported it first, and CODE's `code` if it sets one.
PROBE = """
import importlib.abc, json, sys, traceback
FORBIDDEN = {forbidden!r}
importers = {{}}

class Witness(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in importers and any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
            ours = [f for f in traceback.extract_stack() if "/forkhorse/" in f.filename]
            importers.setdefault(name, f"{{ours[-1].filename}}:{{ours[-1].lineno}}" if ours else "")
        return None

sys.meta_path.insert(0, Witness())
{code}
loaded = [n for n in sys.modules if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)]
print(json.dumps({{
    "loaded": {{name: importers.get(name, "") for name in sorted(loaded)}},
    "code": globals().get("code"),
}}))
"""

RUN_COMMAND = """
import contextlib, io
from forkhorse.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main({argv!r})
"""


def _probe(code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    probe = PROBE.format(forbidden=FORBIDDEN, code=code)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.mark.parametrize("module", CLIENT_MODULES)
def test_importing_a_client_module_loads_nothing_of_the_service(module: str) -> None:
    loaded = _probe(f"import {module}")["loaded"]
    assert loaded == {}, f"importing {module} loads (module: imported at) {loaded}"


def test_running_a_client_command_loads_nothing_of_the_service(tmp_path: Path) -> None:
    # Unconfigured, `status` runs the command path up to the configuration and exits 3.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORKHORSE_")}
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    found = _probe(RUN_COMMAND.format(argv=["status"]), env)
    assert found["code"] == EXIT_USAGE
    assert found["loaded"] == {}, f"`forkhorse status` loads (module: imported at) {found}"
