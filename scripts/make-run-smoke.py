#!/usr/bin/env python3
"""CI proof of the README's first command: start `make run` from this checkout, wait for the
demo project's receipt to pass, then stop the server by its process group.

Bounded: 900 s for the image build and the first receipt, then a clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

PORT = 18787
DEADLINE_SECONDS = 900
TERMINAL = {"passed", "failed", "infrastructure-error", "timed-out"}


def _get(url: str, token: str) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback only
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return dict(json.load(response))


def _demo_receipt(home: Path) -> dict[str, object] | None:
    demo, token_file = home / "demo.json", home / "owner-token"
    if not (demo.exists() and token_file.exists()):
        return None
    project = json.loads(demo.read_text())["project"]
    state = _get(
        f"http://127.0.0.1:{PORT}/projects/{project}/state", token_file.read_text().strip()
    )
    reviews = state["reviews"]
    assert isinstance(reviews, list)
    return reviews[0]["receipt"] if reviews else None


def _wait_for_terminal(server: subprocess.Popen[bytes], home: Path) -> dict[str, object]:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"make run exited early with {server.returncode}")
        try:
            receipt = _demo_receipt(home)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            receipt = None
        if receipt and receipt["status"] in TERMINAL:
            return receipt
        time.sleep(2)
    raise SystemExit(f"no demo receipt within {DEADLINE_SECONDS} s")


def _audit_log(root: Path, home: Path) -> int:
    """The README's auditor: the log's key saved once, then `forkhorse verify-log` on the
    served files alone (the demo's receipt is in it, signed and included)."""
    base = f"http://127.0.0.1:{PORT}/log"
    with urllib.request.urlopen(f"{base}/key", timeout=10) as response:  # noqa: S310
        (home / "log-key.json").write_bytes(response.read())
    project = json.loads((home / "demo.json").read_text())["project"]
    command = [
        str(root / ".venv/bin/forkhorse"), "verify-log", "--log", base,
        "--key", str(home / "log-key.json"), "--state", str(home / "auditor.json"),
        "--project", project,
    ]  # fmt: skip
    return subprocess.run(command, check=False, timeout=120).returncode


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    home = Path(tempfile.mkdtemp(prefix="forkhorse-make-run-"))
    env = {**os.environ, "FORKHORSE_HOME": str(home), "FORKHORSE_PORT": str(PORT)}
    server = subprocess.Popen(["make", "run"], cwd=root, env=env, start_new_session=True)
    try:
        receipt = _wait_for_terminal(server, home)
        audited = _audit_log(root, home)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    print(json.dumps(receipt, indent=2))
    if receipt["status"] != "passed":
        print("make run: the demo receipt did not pass", file=sys.stderr)
        return 1
    print("make run: the demo receipt passed")
    if audited != 0:
        print("make run: forkhorse verify-log did not hold for the demo's log", file=sys.stderr)
        return 1
    print("make run: the demo's transparency log verifies as an auditor checks it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
