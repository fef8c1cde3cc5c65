"""`python -m scripts.openapi write|check`: regenerate the committed `openapi.json`, or
fail when it differs from what the code generates (listing the breaking changes apart)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from forkhorse.service.context import ServiceSettings
from forkhorse.wiring.local import build_local_app, build_local_runtime

from scripts.openapi.diff import breaking_changes

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.json"


def generated() -> str:
    """The document `/openapi.json` serves, as committed: sorted keys, two-space indent."""
    with tempfile.TemporaryDirectory(prefix="forkhorse-openapi-") as home:
        app = build_local_app(build_local_runtime(Path(home)), ServiceSettings())
        try:
            document = json.loads(app.api.openapi().body or "{}")
        finally:
            app.close()
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _report_breaking(committed: str, current: str) -> list[str]:
    changes = breaking_changes(json.loads(committed), json.loads(current))
    for change in changes:
        print(f"breaking: {change}", file=sys.stderr)
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.openapi")
    parser.add_argument("command", choices=("write", "check"))
    args = parser.parse_args(argv)
    current = generated()
    committed = COMMITTED.read_text(encoding="utf-8") if COMMITTED.exists() else None
    if committed is not None and committed != current:
        changes = _report_breaking(committed, current)
        print(f"openapi: {len(changes)} breaking change(s) against the committed document")
    if args.command == "write":
        COMMITTED.write_text(current, encoding="utf-8")
        print(f"openapi: wrote {COMMITTED.name}")
        return 0
    if committed != current:
        print("openapi: openapi.json is stale; run `make openapi` and commit it", file=sys.stderr)
        return 1
    print("openapi: openapi.json matches the code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
