"""JavaScript quick checks in real bubblewrap and real `node`, read through a real git snapshot:
the spec's module contract (`export default async (ctx) => ({ok, message?})`)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from forkhorse.adapters.sandbox import bwrap
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.adapters.sandbox.programs import node_permission_flags
from forkhorse.adapters.sandbox.runtime import NodeMissing, SandboxRuntime, node_runtime
from forkhorse.domain.checks import QuickCheckDef

from tests.support.sandbox import BRAND, JS_MODULE, Committed, RunModule

pytestmark = pytest.mark.sandbox

IMPORT_FAILED = "The check module could not be imported or defines no check function."

SPEC_EXAMPLE = """\
export default async (ctx) => {
  const text = await ctx.read("brand.json");
  return { ok: text !== null, message: "Checked brand.json." };
};
"""


def test_the_spec_example_passes_with_its_source_digest_and_runtime(run_js: RunModule) -> None:
    record = run_js(SPEC_EXAMPLE)
    assert (record.outcome, record.message) == ("passed", "Checked brand.json.")
    digest = hashlib.sha256(SPEC_EXAMPLE.encode()).hexdigest()
    assert record.image_digest == f"module:sha256:{digest}"
    assert (record.runtime, record.platform, record.tier) == (
        "dynamic-worker",
        "local-bwrap",
        "quick",
    )
    assert record.definition == {"name": "probe", "tier": "quick", "module": JS_MODULE}


def test_ok_false_fails_with_the_module_message(run_js: RunModule) -> None:
    record = run_js('export default async () => ({ ok: false, message: "Nope." });\n')
    assert (record.outcome, record.message) == ("failed", "Nope.")


def test_a_message_is_optional_and_a_sync_function_works(run_js: RunModule) -> None:
    record = run_js("export default function check(ctx) { return { ok: true }; }\n")
    assert (record.outcome, record.message) == ("passed", "")


def test_a_thrown_check_fails_with_static_text(run_js: RunModule) -> None:
    record = run_js('export default async () => { throw new Error("secret detail"); };\n')
    assert (record.outcome, record.message) == ("failed", "The check raised an exception.")


def test_ctx_read_stat_list_follow_the_spec(run_js: RunModule) -> None:
    source = """\
export default async (ctx) => {
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const all = await ctx.list("");
  const facts = [
    (await ctx.read("missing.txt")) === null,
    (await ctx.stat("missing.txt")) === null,
    same(await ctx.stat("bin/blob.dat"), { size: 5, binary: true }),
    same(await ctx.stat("src/a.txt"), { size: 2, binary: false }),
    (await ctx.read("src/a.txt")) === "a\\n",
    same(await ctx.list("src/"), ["src/a.txt", "src/b/c.txt"]),
    same(await ctx.list("nothing/"), []),
    same(all, [...all].sort()),
    (await ctx.read("unicode.txt")) === "caf\\u00e9 \\u{1F40E}",
  ];
  return { ok: facts.every(Boolean), message: JSON.stringify(facts) };
};
"""
    files: dict[str, str | bytes] = {
        "src/a.txt": "a\n",
        "src/b/c.txt": "c",
        "bin/blob.dat": b"a\0bcd",
        "unicode.txt": "café 🐎",
    }
    record = run_js(source, files)
    assert record.outcome == "passed", record.message


def test_concurrent_ctx_calls_are_answered_in_order(run_js: RunModule) -> None:
    source = """\
export default async (ctx) => {
  const paths = Array.from({ length: 200 }, (_, i) => (i % 2 ? "a.txt" : "b.txt"));
  const texts = await Promise.all(paths.map((path) => ctx.read(path)));
  const ok = texts.every((text, i) => text === (i % 2 ? "A" : "B"));
  return { ok, message: String(texts.length) };
};
"""
    record = run_js(source, {"a.txt": "A", "b.txt": "B"})
    assert (record.outcome, record.message) == ("passed", "200")


def test_malformed_utf8_is_an_error_the_module_may_handle(run_js: RunModule) -> None:
    source = """\
export default async (ctx) => {
  try {
    await ctx.read("latin1.txt");
  } catch (error) {
    return { ok: error instanceof Error, message: error.message };
  }
  return { ok: false, message: "read returned text" };
};
"""
    record = run_js(source, {"latin1.txt": b"caf\xe9"})
    assert (record.outcome, record.message) == ("passed", "The file is not valid UTF-8 text.")


def test_console_output_is_kept_as_bounded_logs(run_js: RunModule) -> None:
    source = """\
export default async () => {
  console.log("hello", "out", 1);
  console.error("hello err");
  return { ok: true };
};
"""
    record = run_js(source)
    assert record.outcome == "passed"
    assert (record.stdout.text, record.stderr.text) == ("hello out 1\n", "hello err\n")


@pytest.mark.parametrize(
    "source",
    [
        "export default async (ctx) => {\n",  # syntax error
        'throw new Error("at import");\nexport default async () => ({ ok: true });\n',
        "export const check = async () => ({ ok: true });\n",  # no default export
        "export default 42;\n",
        'import other from "./other.js";\nexport default async () => ({ ok: other });\n',
        'import fs from "node:fs";\nexport default async () => ({ ok: true });\n',
        'import "node:child_process";\nexport default async () => ({ ok: true });\n',
        'import { x } from "lodash";\nexport default async () => ({ ok: true });\n',
        "def check(ctx):\n    return {'ok': True}\n",  # Python in a .js file
    ],
    ids=[
        "syntax-error",
        "throws-at-import",
        "no-default",
        "default-not-callable",
        "relative-import",
        "node-fs",
        "node-child-process",
        "package",
        "python-source",
    ],
)
def test_import_and_start_failures_are_infrastructure_errors(
    run_js: RunModule, source: str
) -> None:
    files: dict[str, str | bytes] = {".forkhorse/quick/other.js": "export default true;\n"}
    record = run_js(source, files)
    assert (record.outcome, record.message) == ("infrastructure-error", IMPORT_FAILED)
    assert record.image_digest.startswith("module:sha256:")


def test_a_missing_module_has_an_empty_digest_and_cannot_pass(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> None:
    committed = commit_files({"brand.json": BRAND})
    record = sandbox.run_check(committed.snapshot, QuickCheckDef(name="gone", module=JS_MODULE))
    assert (record.outcome, record.image_digest) == ("infrastructure-error", "")
    assert record.message == "The check module is missing from the snapshot."


def test_the_module_source_is_charged_to_the_budget(run_js: RunModule) -> None:
    body = 'export default async (ctx) => ({ ok: (await ctx.read("brand.json")) !== null });\n'
    source = "//" + "x" * (2 * 1024 * 1024 - len(body) - len(BRAND) - 2) + "\n" + body
    record = run_js(source)
    assert (record.outcome, record.message) == (
        "failed",
        "The check exceeded its snapshot budget of 2097152 bytes.",
    )
    fits = run_js("//" + "x" * (2 * 1024 * 1024 - len(body) - len(BRAND) - 4) + "\n" + body)
    assert fits.outcome == "passed", fits.message


def test_python_and_javascript_checks_share_one_sandbox(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> None:
    python = ".forkhorse/quick/probe.py"
    committed = commit_files(
        {
            "brand.json": BRAND,
            JS_MODULE: SPEC_EXAMPLE,
            python: 'def check(ctx):\n    return {"ok": ctx.read("brand.json") is not None}\n',
        }
    )
    records = [
        sandbox.run_check(committed.snapshot, QuickCheckDef(name=name, module=module))
        for name, module in (("js", JS_MODULE), ("py", python))
    ]
    assert [record.outcome for record in records] == ["passed", "passed"]


def test_a_missing_node_is_an_infrastructure_error_that_says_so(
    commit_files: Callable[[dict[str, str | bytes]], Committed],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    def no_node() -> SandboxRuntime:
        return node_runtime(str(tmp_path / "no-such-node"))

    monkeypatch.setattr(bwrap, "node_runtime", no_node)
    snapshot = commit_files({JS_MODULE: SPEC_EXAMPLE}).snapshot
    record = BwrapSandbox().run_check(snapshot, QuickCheckDef(name="p", module=JS_MODULE))
    assert record.outcome == "infrastructure-error"
    assert record.message.startswith(f"{tmp_path / 'no-such-node'} does not run")
    assert record.image_digest == ""


def test_a_node_installed_under_tmp_still_runs_checks(
    commit_files: Callable[[dict[str, str | bytes]], Committed],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A checkout (and its virtualenv's pinned node) may live under /tmp, which the sandbox
    replaces with its own tmpfs: node is bound at a fixed place inside instead."""
    assert str(tmp_path).startswith("/tmp/")
    copied = tmp_path / "venv" / "bin" / "node"
    copied.parent.mkdir(parents=True)
    shutil.copy2(node_runtime().executable, copied)

    def node_under_tmp() -> SandboxRuntime:
        return node_runtime(str(copied))

    monkeypatch.setattr(bwrap, "node_runtime", node_under_tmp)
    snapshot = commit_files({JS_MODULE: SPEC_EXAMPLE, "brand.json": BRAND}).snapshot
    record = BwrapSandbox().run_check(snapshot, QuickCheckDef(name="p", module=JS_MODULE))
    assert (record.outcome, record.message) == ("passed", "Checked brand.json.")


def test_an_old_node_is_refused_by_version(tmp_path: Path) -> None:
    old = tmp_path / "node"
    old.write_text("#!/bin/sh\necho v16.20.2\n")
    old.chmod(0o755)
    with pytest.raises(NodeMissing, match=r"node 16\.20\.2 is too old; .* need node 18 or later"):
        node_runtime(str(old))


@pytest.mark.parametrize(
    ("version", "flags"),
    [
        ((18, 19, 0), ()),
        ((20, 20, 2), ("--experimental-permission",)),
        ((22, 12, 0), ("--experimental-permission",)),
        ((22, 13, 0), ("--permission",)),
        ((23, 4, 0), ("--experimental-permission",)),
        ((24, 1, 0), ("--permission",)),
    ],
)
def test_the_permission_model_flag_follows_the_node_version(
    version: tuple[int, int, int], flags: tuple[str, ...]
) -> None:
    assert node_permission_flags(version) == flags
