"""`make soak`'s driver, for 75 s with one `kill -9`: real serve, real git pushes, real
sandboxes and containers. Run by `make test-soak` (marker `soak`), not by `make test`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.containers import IMAGE_HOME

pytestmark = [pytest.mark.soak, pytest.mark.podman, pytest.mark.sandbox]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_a_short_soak_with_one_kill_passes_and_reports(
    tmp_path: Path,
    default_ref: str,
) -> None:
    report = tmp_path / "soak-report.json"
    command = [
        sys.executable, "-m", "scripts.soak", "--seconds", "75", "--kill-every", "40",
        "--sample-every", "2", "--image-home", str(IMAGE_HOME), "--report", str(report),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=800)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    result = json.loads(report.read_text())
    assert result["verdict"] == "pass", result["reasons"]
    assert "5xx" not in result["failuresByKind"]
    assert len(result["restarts"]) == 1
    # Mixed traffic really ran: passing and failing working receipts, hostile ones that
    # never passed, and every leak metric sampled in both server lifetimes.
    seen = result["receiptsSeen"]
    assert seen.get("working review-created passed", 0) > 0, seen
    assert any(key.startswith("hostile ") for key in seen), seen
    assert not any(key.startswith("hostile ") and key.endswith(" passed") for key in seen)
    assert {sample["epoch"] for sample in result["samples"]} == {0, 1}
    assert set(result["leaks"]) >= {"rss_bytes", "open_fds", "threads", "containers", "mounts"}
    assert result["drained"] == {"runningReceipts": 0, "containers": 0, "processes": 0, "mounts": 0}
    assert "Soak: 75 s" in done.stdout
    assert "verdict: pass" in done.stdout
