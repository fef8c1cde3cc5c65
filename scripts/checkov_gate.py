"""`make check`'s hygiene scan: checkov over template.yaml, held to checkov-baseline.yaml.

Run with the checkov venv's Python (scripts/check.sh does). It fails on a finding the
baseline does not accept, and on an accepted one the scan no longer reports, naming each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "checkov-baseline.yaml"
Finding = tuple[str, str]  # (check id, logical id)


def scanned() -> set[Finding]:
    checkov = Path(sys.executable).with_name("checkov")
    completed = subprocess.run(
        [str(checkov), "--file", "template.yaml", "--framework", "cloudformation",
         "--skip-download", "--quiet", "--compact", "--output", "json"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if completed.returncode not in (0, 1):  # 1: findings; anything else: checkov broke
        raise SystemExit(f"checkov failed ({completed.returncode}):\n{completed.stderr}")
    report: dict[str, Any] = json.loads(completed.stdout)
    failed = report.get("results", {}).get("failed_checks", [])
    return {(item["check_id"], item["resource"].split(".", 1)[1]) for item in failed}


def accepted() -> set[Finding]:
    baseline: dict[str, dict[str, Any]] = yaml.safe_load(BASELINE.read_text(encoding="utf-8"))
    for check, entry in baseline.items():
        if not str(entry.get("reason", "")).strip():
            raise SystemExit(f"{BASELINE.name}: {check} gives no reason")
    return {(check, name) for check, entry in baseline.items() for name in entry["resources"]}


def main() -> int:
    found, allowed = scanned(), accepted()
    for check, name in sorted(found - allowed):
        print(f"checkov: {check} on {name} is not accepted in {BASELINE.name}", file=sys.stderr)
    for check, name in sorted(allowed - found):
        print(f"checkov: {BASELINE.name} accepts {check} on {name}, which no longer fails; "
              "drop it", file=sys.stderr)  # fmt: skip
    if found != allowed:
        return 1
    print(f"checkov: {len(found)} findings, each accepted in {BASELINE.name} with its reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
