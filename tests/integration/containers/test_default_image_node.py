"""Issue 30 item 2: a quick check and a full check in the local `default` image run the same
Node, the pinned Node 24 LTS (layers/node/requirements.txt).

The image is built by the `default_ref` session fixture (about 100 s the first time)."""

from __future__ import annotations

import subprocess

import pytest
from forkhorse.adapters.node_release import pinned_version
from forkhorse.adapters.sandbox.runtime import node_runtime

from tests.integration.containers.helpers import RunCheck

pytestmark = [pytest.mark.podman, pytest.mark.timeout(900)]


def test_quick_and_full_checks_report_the_same_node(run_check: RunCheck, default_ref: str) -> None:
    attempt = run_check(
        "node -p process.version && node -p process.versions.v8", reference=default_ref
    )
    assert attempt.result.outcome == "passed", attempt.result.stderr.text
    full_version, full_v8 = attempt.result.stdout.text.split()
    quick = node_runtime().executable  # what the quick sandbox binds and runs
    quick_version, quick_v8 = subprocess.run(
        [quick, "-p", "process.version + ' ' + process.versions.v8"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert full_version == quick_version == f"v{pinned_version()}"
    assert full_v8 == quick_v8
    assert full_version.startswith("v24.")
