"""Quick modules whose file names hold more dots (`brand.v2.js`, `check.node.js`, `x.y.py`):
parsed from the commit's own `.forkhorse/checks` and run in the real bubblewrap sandbox, as a
review run would (issue 30, item 3; they were refused as invalid configuration)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pytest
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.domain.checks import CHECKS_PATH, QuickCheckDef, parse_checks
from forkhorse.domain.snapshot import SnapshotBudget

from tests.support.sandbox import BRAND, Committed

pytestmark = pytest.mark.sandbox

JS = """\
export default async (ctx) => {
  const text = await ctx.read("brand.json");
  return { ok: JSON.parse(text).slug === "forkhorse", message: "JS module name ok." };
};
"""
PY = """\
import json


def check(ctx):
    return {"ok": json.loads(ctx.read("brand.json"))["slug"] == "forkhorse", "message": "PY ok."}
"""
MODULES = {
    ".forkhorse/quick/brand.v2.js": (JS, "JS module name ok."),
    ".forkhorse/quick/check.node.js": (JS, "JS module name ok."),
    ".forkhorse/quick/x.y.py": (PY, "PY ok."),
}


def test_dotted_module_names_parse_from_the_commit_and_pass_in_the_real_sandbox(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> None:
    checks_file = json.dumps(
        [
            {"name": f"q{index}", "tier": "quick", "module": module}
            for index, module in enumerate(MODULES)
        ]
    )
    sources = {module: source for module, (source, _) in MODULES.items()}
    committed = commit_files({"brand.json": BRAND, CHECKS_PATH: checks_file, **sources})
    text = committed.snapshot.reader(SnapshotBudget()).read(CHECKS_PATH)
    assert text is not None
    checks = parse_checks(text)
    assert all(isinstance(check, QuickCheckDef) for check in checks)
    assert [check.module for check in checks if isinstance(check, QuickCheckDef)] == list(MODULES)
    for check in checks:
        assert isinstance(check, QuickCheckDef)
        source, message = MODULES[check.module]
        record = sandbox.run_check(committed.snapshot, check)
        assert (record.outcome, record.message) == ("passed", message), check.module
        digest = hashlib.sha256(source.encode()).hexdigest()
        assert record.image_digest == f"module:sha256:{digest}"
        assert record.definition == {"name": check.name, "tier": "quick", "module": check.module}
        assert record.runtime == "dynamic-worker"
