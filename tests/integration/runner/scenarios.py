"""The receipt-run scenarios shared by the local supervisor tests and the Step Functions
drift guard: each is a commit's files plus the outcome a user must see."""

from __future__ import annotations

import json
from dataclasses import dataclass

PASSING_QUICK = (
    "def check(ctx):\n"
    '    return {"ok": ctx.read("brand.json") is not None, "message": "Brand found."}\n'
)
FAILING_QUICK = 'def check(ctx):\n    return {"ok": False, "message": "Brand is missing a mark."}\n'
BRAND = '{"name": "Demo", "slug": "demo", "mark": "D"}\n'
PASSING_QUICK_JS = (
    "export default async (ctx) => ({\n"
    '  ok: (await ctx.read("brand.json")) !== null,\n'
    '  message: "Brand found.",\n'
    "});\n"
)
FAILING_QUICK_JS = 'export default async () => ({ ok: false, message: "No mark." });\n'


def checks_file(*checks: dict[str, object]) -> str:
    return json.dumps(list(checks))


def quick(name: str, module: str, extension: str = "py") -> dict[str, object]:
    return {"name": name, "tier": "quick", "module": f".forkhorse/quick/{module}.{extension}"}


def full(name: str, run: str, image: str = "busybox", timeout: int = 30) -> dict[str, object]:
    return {"name": name, "tier": "full", "image": image, "run": run, "timeoutSeconds": timeout}


@dataclass(frozen=True)
class Scenario:
    name: str
    files: dict[str, str]
    status: str | None  # None: the review reads receipt: null
    outcomes: tuple[tuple[str, str], ...]
    attached: bool


def _files(checks: str | None, **modules: str) -> dict[str, str]:
    files = {"brand.json": BRAND, **{f".forkhorse/quick/{k}.py": v for k, v in modules.items()}}
    if checks is not None:
        files[".forkhorse/checks"] = checks
    return files


SCENARIOS = [
    Scenario(
        "all-pass",
        _files(
            checks_file(quick("brand", "brand"), full("test", "test -f brand.json && echo ok")),
            brand=PASSING_QUICK,
        ),
        "passed",
        (("brand", "passed"), ("test", "passed")),
        True,
    ),
    Scenario(
        "quick-failure-skips-full",
        _files(checks_file(quick("brand", "brand"), full("test", "true")), brand=FAILING_QUICK),
        "failed",
        (("brand", "failed"), ("test", "failed")),
        True,
    ),
    Scenario(
        "javascript-and-python-quick-checks",
        {
            **_files(
                checks_file(
                    quick("brand-js", "brand", "js"),
                    quick("brand", "brand"),
                    full("test", "true"),
                ),
                brand=PASSING_QUICK,
            ),
            ".forkhorse/quick/brand.js": PASSING_QUICK_JS,
        },
        "passed",
        (("brand-js", "passed"), ("brand", "passed"), ("test", "passed")),
        True,
    ),
    Scenario(
        "javascript-quick-failure-skips-full",
        {
            **_files(checks_file(quick("brand-js", "brand", "js"), full("test", "true"))),
            ".forkhorse/quick/brand.js": FAILING_QUICK_JS,
        },
        "failed",
        (("brand-js", "failed"), ("test", "failed")),
        True,
    ),
    Scenario(
        "full-failure",
        _files(checks_file(full("test", "echo broken >&2; exit 3"))),
        "failed",
        (("test", "failed"),),
        True,
    ),
    Scenario(
        "timeout",
        _files(checks_file(full("slow", "sleep 30", timeout=1))),
        "timed-out",
        (("slow", "timed-out"),),
        True,
    ),
    Scenario(
        "unresolved-image",
        _files(checks_file(full("test", "true", image="nonexistent"))),
        "infrastructure-error",
        (("test", "infrastructure-error"),),
        True,
    ),
    Scenario(
        "invalid-configuration",
        _files('[{"name": "x", "tier": "quick", "module": "../escape.py"}]'),
        "infrastructure-error",
        ((".forkhorse/checks", "infrastructure-error"),),
        False,
    ),
    Scenario("absent-checks", _files(None), None, (), False),
]
