"""Hostile JavaScript quick-check modules in real bubblewrap and real `node`: each has its own
test and none may pass. A probe returns `ok: true` only if its attack worked, so a pass would
be an escape.

Modules that must hit the real 10-second deadline are started together, in parallel threads,
by one module-scoped fixture; each still has its own test and its own fresh sandbox.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.limits import QUICK_SANDBOX, format_bytes
from forkhorse.domain.receipts import CheckRecord

from tests.support.sandbox import (
    BRAND,
    DEADLINE_MESSAGE,
    JS_MODULE,
    SECRET,
    Committed,
    RecordingSnapshot,
    RunModule,
    assert_never_passed,
    make_committer,
)

pytestmark = pytest.mark.sandbox

IMPORT_FAILED = "The check module could not be imported or defines no check function."
RAISED = "The check raised an exception."
INVALID = 'The check returned an invalid result; a check returns {"ok": bool, "message"?: str}.'


# --- network ------------------------------------------------------------------------------


def test_fetch_to_loopback(run_js: RunModule, loopback_listener: tuple[int, list[object]]) -> None:
    port, accepted = loopback_listener
    source = f"""\
export default async () => {{
  const response = await fetch("http://127.0.0.1:{port}/");
  return {{ ok: true, message: String(response.status) }};
}};
"""
    record = run_js(source)
    assert (record.outcome, record.message) == ("failed", RAISED)
    assert accepted == []


def test_importing_node_net(run_js: RunModule, loopback_listener: tuple[int, list[object]]) -> None:
    port, accepted = loopback_listener
    source = f"""\
import net from "node:net";
export default () => new Promise((resolve) => {{
  net.connect({port}, "127.0.0.1", () => resolve({{ ok: true, message: "connected" }}));
}});
"""
    record = run_js(source)
    assert (record.outcome, record.message) == ("infrastructure-error", IMPORT_FAILED)
    assert accepted == []


@pytest.mark.parametrize("specifier", ["node:net", "net", "node:http", "node:dgram", "node:dns"])
def test_dynamically_importing_the_network(
    run_js: RunModule, loopback_listener: tuple[int, list[object]], specifier: str
) -> None:
    port, accepted = loopback_listener
    source = f"""\
export default async () => {{
  const net = await import("{specifier}");
  return {{ ok: true, message: typeof (net.connect || net.request || net.lookup)({port}) }};
}};
"""
    record = run_js(source)
    assert (record.outcome, record.message) == ("infrastructure-error", IMPORT_FAILED)
    assert accepted == []


# --- host files, the environment, processes -----------------------------------------------


@pytest.mark.parametrize(
    "attack",
    [
        'const fs = await import("node:fs"); return fs.readFileSync("/etc/passwd", "utf8");',
        'const fs = await import("fs/promises"); return await fs.readFile("/etc/passwd", "utf8");',
        'return await ctx.read("/etc/passwd");',
        'return await ctx.read("../../../../etc/passwd");',
        "return await ctx.read(PYPROJECT);",
    ],
    ids=["node-fs", "fs-promises", "ctx-absolute", "ctx-traversal", "ctx-host-path"],
)
def test_reading_host_files(run_js: RunModule, attack: str) -> None:
    pyproject = json.dumps(str(Path(__file__).resolve().parents[3] / "pyproject.toml"))
    source = f"""\
const PYPROJECT = {pyproject};
export default async (ctx) => {{
  const text = await (async () => {{ {attack} }})();
  return {{ ok: typeof text === "string", message: "read host file" }};
}};
"""
    record = run_js(source)
    assert_never_passed(record)
    assert "root:" not in record.message


def test_process_env_holds_nothing(run_js: RunModule, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKHORSE_SECRET_TOKEN", SECRET)
    source = """\
export default async () => {
  const found = [typeof process, typeof globalThis.process, typeof require, typeof module,
                 typeof Buffer, typeof fetch, typeof setTimeout, typeof queueMicrotask];
  return { ok: found.some((kind) => kind !== "undefined"), message: found.join(",") };
};
"""
    record = run_js(source)
    assert_never_passed(record)
    assert record.message == ",".join(["undefined"] * 8)


def test_reading_process_env_throws(run_js: RunModule, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKHORSE_SECRET_TOKEN", SECRET)
    source = """\
export default async () => ({ ok: true, message: JSON.stringify(process.env) });
"""
    record = run_js(source)
    assert (record.outcome, record.message) == ("failed", RAISED)


@pytest.mark.parametrize(
    "attack",
    [
        'const cp = await import("node:child_process"); return cp.execSync("id").toString();',
        'const { Worker } = await import("node:worker_threads"); return String(new Worker("1"));',
        'const vm = await import("node:vm"); return vm.runInThisContext("process").pid;',
        'const m = await import("node:module"); return m.createRequire("/")("fs");',
        'return (await import("node:process")).env;',
    ],
    ids=["child-process", "worker-threads", "vm", "create-require", "node-process"],
)
def test_reaching_builtins(run_js: RunModule, attack: str) -> None:
    """A dynamic import() is refused by its text, before the module runs (issue 28)."""
    source = f"""\
export default async () => {{
  const got = await (async () => {{ {attack} }})();
  return {{ ok: got !== undefined, message: "reached a builtin" }};
}};
"""
    record = run_js(source)
    assert (record.outcome, record.message) == ("infrastructure-error", IMPORT_FAILED)


# `import` then `(` or `.` anywhere in the text, even in a string or a comment: node runs its
# own code for import() and import.meta on the check's stack (issue 28).
DYNAMIC_IMPORT_TEXTS = {
    "call": 'await import("node:fs");',
    "spaced": 'await import   ("node:fs");',
    "block-comment": 'await import /* ( */ ("node:fs");',
    "line-comment": 'await import // x\n  ("node:fs");',
    "newline": 'await import\n("node:fs");',
    "spread": 'return [...import("node:fs")];',
    "after-a-number": 'const n = 1.\nimport("node:fs");',
    "meta": "return import.meta.url;",
    "meta-spaced": "return import . meta;",
    "in-a-string": 'return "import(x)";',
    "in-a-comment": "// import.meta\nreturn 1;",
    "a-method-named-import": "return { import() {} };",
}


@pytest.mark.parametrize(
    "body", list(DYNAMIC_IMPORT_TEXTS.values()), ids=list(DYNAMIC_IMPORT_TEXTS)
)
def test_a_dynamic_import_in_the_text_is_refused(run_js: RunModule, body: str) -> None:
    record = run_js(f"export default async () => {{ {body} }};\n")
    assert (record.outcome, record.message) == ("infrastructure-error", IMPORT_FAILED)


@pytest.mark.parametrize(
    "body",
    [
        'return { ok: false, message: "no import here" };',
        "const imports = { x: 1 }; return { ok: imports.x === 2 };",
        "const important = () => 1; return { ok: important() === 2 };",
        "const reimport = () => 1; return { ok: reimport() === 2 };",
        "const $import = 1; return { ok: $import === 2 };",
    ],
    ids=["a-word", "imports", "important", "reimport", "dollar-import"],
)
def test_the_word_import_alone_is_not_refused(run_js: RunModule, body: str) -> None:
    record = run_js(f"export default async () => {{ {body} }};\n")
    assert record.outcome == "failed", record.message


# --- eval and Function tricks ----------------------------------------------------------------

ESCAPES = {
    "eval": 'eval("process")',
    "indirect-eval": '(0, eval)("globalThis.process")',
    "function": 'Function("return process")()',
    "async-function": '(async () => {}).constructor("return process")()',
    "ctx-read-constructor": 'ctx.read.constructor("return process")()',
    "ctx-promise-constructor": 'ctx.read("brand.json").constructor.constructor("return process")()',
    "ctx-proto": 'Object.getPrototypeOf(ctx)?.constructor?.constructor("return process")()',
    "console-constructor": 'console.log.constructor("return process")()',
    "eval-import": 'await eval("imp" + "ort(\\"node:child_process\\")")',
    "function-import": 'await Function("return imp" + "ort(\\"node:fs\\")")()',
    "error-stack-callsites": """(() => {
      let found;
      Error.prepareStackTrace = (_, sites) =>
        sites.map((site) => site.getThis() || site.getFunction());
      const stack = new Error().stack;
      for (const item of stack)
        if (item && item.constructor) found = item.constructor("return process")();
      return found;
    })()""",
    "wasm": "new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))",
}


@pytest.mark.parametrize("expression", list(ESCAPES.values()), ids=list(ESCAPES))
def test_eval_and_function_tricks(run_js: RunModule, expression: str) -> None:
    source = f"""\
export default async (ctx) => {{
  let got;
  try {{
    got = await ({expression});
  }} catch (error) {{
    return {{ ok: false, message: "refused" }};
  }}
  const reached = ["pid", "env", "binding", "execSync", "readFileSync", "connect"];
  const escaped = Object(got) === got && reached.some((name) => name in got);
  return {{ ok: escaped, message: escaped ? "escaped" : "nothing: " + typeof got }};
}};
"""
    record = run_js(source)
    assert_never_passed(record)
    assert record.outcome == "failed"
    assert record.message == "refused" or record.message.startswith("nothing")


# --- prototype pollution --------------------------------------------------------------------

POLLUTIONS = {
    "ctx-read-replaced": 'ctx.read = async () => "pwned"; return { ok: true };',
    "ctx-prototype": 'Object.setPrototypeOf(ctx, { read: async () => "x" }); return { ok: true };',
    "object-prototype-ok": "Object.prototype.ok = true; return {};",
    "result-prototype": "return Object.create({ ok: true });",
    "result-getter": "let n = 0; return { get ok() { n += 1; return n > 1; } };",
    "result-proxy": "return new Proxy({ ok: false }, { get: () => true });",
    "result-symbol": "return { ok: true, [Symbol('x')]: 1 };",
    "result-class": "return new (class { constructor() { this.ok = true; } })();",
    "result-array": "return Object.assign([], { ok: true });",
    "object-prototype-then": (
        "Object.prototype.then = function (resolve) { delete Object.prototype.then; "
        "resolve({ ok: 'yes' }); }; return { ok: true };"
    ),
    "promise-then": (
        "const then = Promise.prototype.then; Promise.prototype.then = function (a, b) { "
        "return then.call(this, () => a({ ok: true }), b); }; return { ok: false };"
    ),
    "json-stringify": "JSON.stringify = () => '{\"ok\":true}'; return { ok: 'true' };",
}


@pytest.mark.parametrize("body", list(POLLUTIONS.values()), ids=list(POLLUTIONS))
def test_prototype_pollution_of_ctx_or_of_the_result(run_js: RunModule, body: str) -> None:
    record = run_js(f"export default async (ctx) => {{ {body} }};\n")
    assert_never_passed(record)
    assert record.outcome == "failed"
    assert record.message in (INVALID, RAISED, "")  # "": the module's own {ok: false}


# --- forging a pass -------------------------------------------------------------------------


def test_forging_a_pass_on_stdout(run_js: RunModule) -> None:
    source = """\
export default async () => {
  const capability = "0".repeat(64);
  for (const frame of [capability + "D1\\0forged pass", "D1", '{"ok":true}', "passed"]) {
    console.log(String.fromCharCode(0, 0, 0, frame.length) + frame);
    console.error(frame);
  }
  throw new Error("the real verdict");
};
"""
    record = run_js(source)
    assert (record.outcome, record.message) == ("failed", RAISED)
    assert "forged pass" in record.stdout.text


def test_forging_a_pass_on_the_rpc_descriptor(run_js: RunModule) -> None:
    """The module never holds the capability socket: no fs, net or process to reach a file
    descriptor, and a frame smuggled into a ctx path is just a (rejected) path."""
    source = """\
export default async (ctx) => {
  const frame = "\\u0000\\u0000\\u0000\\u0043" + "0".repeat(64) + "D1";
  const attempts = [];
  for (const fd of [3, 4, 5, 6, 7, 8, 9]) {
    try {
      globalThis.process.binding("fs").writeString(fd, frame);
      attempts.push(fd);
    } catch {}
  }
  try { await ctx.read(frame); attempts.push("path"); } catch {}
  try { await ctx.read("a" + frame.slice(4)); } catch {}
  return { ok: false, message: "wrote to " + JSON.stringify(attempts) };
};
"""
    record = run_js(source)
    assert (record.outcome, record.message) == ("failed", "wrote to []")


# --- memory, output, messages, thrown values, thenables -----------------------------------


def test_exhausting_the_heap(run_js: RunModule) -> None:
    source = """\
export default async () => {
  const hoard = [];
  for (;;) hoard.push(new Array(100_000).fill(1.5));
};
"""
    record = run_js(source)
    assert record.outcome == "failed"
    heap = format_bytes(QUICK_SANDBOX.heap_bytes)
    assert record.message == f"The check exceeded its JavaScript heap limit of {heap}."


def test_allocating_8_gb_of_buffers(run_js: RunModule) -> None:
    source = """\
export default async () => {
  const buffers = [];
  for (let i = 0; i < 8; i += 1) buffers.push(new Uint8Array(1024 ** 3).fill(1));
  return { ok: true, message: String(buffers.length) };
};
"""
    record = run_js(source)
    assert_never_passed(record)
    assert record.outcome == "failed"


def test_printing_megabytes(run_js: RunModule) -> None:
    source = """\
export default async () => {
  const chunk = "x".repeat(65536);
  for (let i = 0; i < 128; i += 1) console.log(chunk);
  return { ok: true, message: "printed 8 MiB" };
};
"""
    record = run_js(source)
    assert_never_passed(record)
    assert record.message == "The check wrote more than 1 MiB of output."


def test_a_huge_message_is_cut_to_4_kib(run_js: RunModule) -> None:
    record = run_js('export default async () => ({ ok: false, message: "é".repeat(1e6) });\n')
    assert record.outcome == "failed"
    assert len(record.message.encode("utf-8")) <= 4 * 1024
    assert record.message.startswith("é" * 2000)
    assert record.message.endswith("[message cut at 4 KiB]")


def test_unicode_and_bidi_in_messages(run_js: RunModule) -> None:
    source = (
        "export default async () => ({ ok: false, message: "
        '"red \\u001b[31m \\u202e evil \\u2066x\\u2069 \\ud800 lone \\u0000 nul 🐎" });\n'
    )
    record = run_js(source)
    assert record.outcome == "failed"
    for character in ("\x1b", "\u202e", "\u2066", "\u2069", "\x00", "\ud800"):
        assert character not in record.message
    assert "🐎" in record.message


@pytest.mark.parametrize(
    "thrown",
    [
        "42",
        "null",
        "undefined",
        "{ ok: true }",
        'new Proxy({}, { get() { throw new Error("trap"); } })',
        '{ toString() { throw new Error("again"); }, get message() { throw 1; } }',
        "Symbol('s')",
        'Object.assign(new RangeError("x"), { name: "MemoryError" })',
    ],
    ids=["number", "null", "undefined", "ok-object", "proxy", "hostile-object", "symbol", "range"],
)
def test_throwing_non_error_values(run_js: RunModule, thrown: str) -> None:
    record = run_js(f"export default async () => {{ throw {thrown}; }};\n")
    assert (record.outcome, record.message) == ("failed", RAISED)


THENABLES = {
    "resolves-invalid": "return { then(resolve) { resolve({ ok: 'true' }); } };",
    "rejects": "return { then(_, reject) { reject({ ok: true }); } };",
    "then-throws": "return { then() { throw { ok: true }; } };",
    "then-getter-throws": "return { get then() { throw new Error('getter'); } };",
    "first-resolution-wins": (
        "return { then(resolve) { resolve({ ok: false }); resolve({ ok: true }); } };"
    ),
    "grabs-the-resolver": (
        "return { then(resolve) { let p; try { p = resolve.constructor('return process')(); } "
        "catch {} resolve({ ok: typeof p === 'object' && p !== null }); } };"
    ),
    "sync-returns-thenable": "return { then(resolve) { resolve(undefined); } };",
}


@pytest.mark.parametrize("body", list(THENABLES.values()), ids=list(THENABLES))
def test_returning_a_thenable(run_js: RunModule, body: str) -> None:
    record = run_js(f"export default (ctx) => {{ {body} }};\n")
    assert_never_passed(record)
    assert record.outcome == "failed"


# --- budgets ------------------------------------------------------------------------------


def test_reading_past_the_byte_budget(run_js: RunModule) -> None:
    source = """\
export default async (ctx) => {
  for (let i = 0; i < 3; i += 1) {
    try { await ctx.read("big.txt"); } catch {}
  }
  return { ok: true };
};
"""
    record = run_js(source, {"big.txt": "y" * (900 * 1024)})
    assert_never_passed(record)
    assert record.message == "The check exceeded its snapshot budget of 2097152 bytes."


def test_concurrent_reads_past_the_byte_budget(run_js: RunModule) -> None:
    source = """\
export default async (ctx) => {
  const reads = Array.from({ length: 8 }, () => ctx.read("big.txt").catch(() => null));
  const texts = await Promise.all(reads);
  return { ok: true, message: String(texts.filter((text) => text !== null).length) };
};
"""
    record = run_js(source, {"big.txt": "y" * (400 * 1024)})
    assert_never_passed(record)
    assert record.message == "The check exceeded its snapshot budget of 2097152 bytes."


def test_listing_past_the_listed_paths_budget(run_js: RunModule) -> None:
    files: dict[str, str | bytes] = {f"many/{index:03}.txt": "x" for index in range(300)}
    source = """\
export default async (ctx) => {
  for (let i = 0; i < 7; i += 1) await ctx.list("many/");
  return { ok: true };
};
"""
    record = run_js(source, files)
    assert_never_passed(record)
    assert record.message == "The check exceeded its budget of 2000 listed paths."


def test_calling_past_the_file_call_budget(run_js: RunModule) -> None:
    source = """\
export default async (ctx) => {
  for (let i = 0; i < 10_001; i += 1) {
    try { await ctx.stat("brand.json"); } catch { break; }
  }
  return { ok: true };
};
"""
    record = run_js(source)
    assert_never_passed(record)
    assert record.message == "The check exceeded its budget of 10000 tree entries and file calls."


@pytest.mark.parametrize(
    "call",
    [
        'ctx.read("a/".repeat(64) + "b")',
        'ctx.stat("../brand.json")',
        'ctx.list("../")',
        'ctx.read(".git/config")',
        'ctx.read("a//b")',
        'ctx.read("a\\\\b")',
        "ctx.read(42)",
        "ctx.list({ toString() { return ''; } })",
    ],
    ids=["65-levels", "dotdot", "list-dotdot", "dot-git", "empty", "backslash", "number", "object"],
)
def test_rejected_paths_read_nothing(run_js: RunModule, call: str) -> None:
    source = f"""\
export default async (ctx) => {{
  let leaked;
  try {{
    leaked = await {call};
  }} catch (refusal) {{
    return {{ ok: false, message: "refused: " + refusal.message }};
  }}
  return {{ ok: true, message: "leaked: " + JSON.stringify(leaked) }};
}};
"""
    record = run_js(source)
    assert_never_passed(record)
    assert record.message.startswith("refused: ")


# --- Modules that must reach the real 10-second deadline, run side by side. ---

DEADLINE_MODULES = {
    "infinite-loop": "export default () => { for (;;) {} };\n",
    "never-settles": (
        "export default async () => { await new Promise(() => {}); return { ok: true }; };\n"
    ),
    "thenable-never-settles": "export default () => ({ then() {} });\n",
    "loops-at-import": "for (;;) {}\nexport default async () => ({ ok: true });\n",
    "awaits-forever-at-import": (
        "await new Promise(() => {});\nexport default async () => ({ ok: true });\n"
    ),
    "reads-after-deadline": (  # paced below the call budget (the module's realm has no timers)
        "export default async (ctx) => {\n"
        "  for (;;) {\n"
        '    await ctx.read("brand.json");\n'
        "    for (const until = Date.now() + 25; Date.now() < until;) {}\n"
        "  }\n"
        "};\n"
    ),
}


@pytest.fixture(scope="module")
def deadline_records(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[CheckRecord, RecordingSnapshot]]:
    sandbox = BwrapSandbox()
    commit = make_committer(tmp_path_factory.mktemp("deadline-js"))
    snapshots = {
        name: commit({"brand.json": BRAND, JS_MODULE: source}).snapshot
        for name, source in DEADLINE_MODULES.items()
    }

    def run(name: str) -> tuple[CheckRecord, RecordingSnapshot]:
        snapshot = snapshots[name]
        return sandbox.run_check(snapshot, QuickCheckDef(name=name, module=JS_MODULE)), snapshot

    with ThreadPoolExecutor(max_workers=len(DEADLINE_MODULES)) as pool:
        return dict(zip(DEADLINE_MODULES, pool.map(run, DEADLINE_MODULES), strict=True))


@pytest.mark.parametrize("name", list(DEADLINE_MODULES))
def test_deadline_bound_modules_time_out(
    deadline_records: dict[str, tuple[CheckRecord, RecordingSnapshot]], name: str
) -> None:
    record, snapshot = deadline_records[name]
    assert_never_passed(record)
    assert (record.outcome, record.message) == ("timed-out", DEADLINE_MESSAGE)
    assert record.duration_ms is not None
    assert 9_900 <= record.duration_ms < 12_000
    assert all(budget.revoked for budget in snapshot.budgets)


def test_the_module_file_itself_is_not_reachable(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> None:
    """The module is evaluated from its source alone: no path of the host's checkout or of
    the snapshot is visible through a stack trace (there are none) or an error's text
    (`import.meta` is refused with every dynamic import)."""
    source = """\
export default async () => {
  let text;
  try { null.x; } catch (error) { text = String(error) + " | " + error.stack; }
  return { ok: false, message: text + " | " + new Error().stack };
};
"""
    committed = commit_files({JS_MODULE: source})
    record = sandbox.run_check(committed.snapshot, QuickCheckDef(name="probe", module=JS_MODULE))
    assert record.outcome == "failed"
    assert str(committed.worktree) not in record.message
