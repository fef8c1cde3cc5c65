"""An agent's command starts fast: importing the client loads neither the service, the
signing code nor any AWS or git library (each costs a share of a second per command)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("boto3", "botocore", "securesystemslib", "aws_xray_sdk", "aws_lambda_powertools",
         "dulwich", "forkhorse.service.facade", "forkhorse.attest", "forkhorse.wiring")  # fmt: skip


def test_the_client_cli_imports_nothing_heavy() -> None:
    probe = "import sys, json, forkhorse.client.cli; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    assert [name for name in loaded if name.startswith(HEAVY)] == []
