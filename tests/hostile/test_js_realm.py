"""The JavaScript sandbox's realm (issue 28): nothing of the harness's realm reaches a check.

Real `node`, real bubblewrap. Each hostile module collects every value the sandbox lets it
receive or observe for one escape family and walks each one's prototypes and properties for a
`Function` constructor of another realm (the harness's: its `Function` returns the harness's
`process`). Reaching one, it forges a pass through the harness's own channel where it can and
reports "ESCAPED via ..." otherwise; contained, it returns `{ok: false, message: "contained"}`.
So a test asserts both that the check did not pass and that nothing foreign was reached.

Families whose module text holds `import(` or `import.` are refused before they run (an
`infrastructure-error`, as a static `import` is): the host runs node's own code for both,
on the check's stack, where a stack overflow would throw an error of the host's realm.

Against the harness before issue 28, the import() families (direct, through `eval`, at a deep
stack) and the deep-stack `error.stack` families forged a pass, the deep-stack `ctx` and
`console` calls wedged the child until its deadline, and node reported an uncaught exception
itself (the check exited without a result).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.receipts import CheckRecord

from tests.support.sandbox import BRAND, JS_MODULE, make_committer

pytestmark = pytest.mark.sandbox

IMPORT_FAILED = "The check module could not be imported or defines no check function."
INVALID = 'The check returned an invalid result; a check returns {"ok": bool, "message"?: str}.'
CONTAINED = ("failed", "contained")
REFUSED = ("infrastructure-error", IMPORT_FAILED)

# Shared by every hostile module: `inspect(value, how)` walks `value` for a foreign realm's
# `Function`; `exploit` then forges a pass through the harness's `send` (a global of its realm
# before issue 28) and records the escape; `verdict()` is the module's honest result.
PRELUDE = r"""
const HOME_OBJECT = Object.prototype;
const HOME_FUNCTION = Function;
const escapes = [];
const rootOf = (value) => {
  let root = value;
  for (let step = 0; step < 64; step += 1) {
    const up = Reflect.getPrototypeOf(root);
    if (up === null) return root;
    root = up;
  }
  return root;
};
const explored = new WeakSet();
function foreignFunction(start) {
  const queue = [start];
  for (let walked = 0; queue.length > 0 && walked < 3000; walked += 1) {
    const value = queue.shift();
    if (value === null || (typeof value !== "object" && typeof value !== "function")) continue;
    if (explored.has(value)) continue;
    explored.add(value);
    try {
      const root = rootOf(value);
      if (root !== value && root !== HOME_OBJECT) {
        const F = root.constructor.constructor;
        if (typeof F === "function" && F !== HOME_FUNCTION) return F;
      }
      queue.push(Reflect.getPrototypeOf(value));
      for (const key of Reflect.ownKeys(value)) {
        const slot = Reflect.getOwnPropertyDescriptor(value, key);
        if (slot !== undefined) queue.push(slot.value, slot.get, slot.set);
      }
    } catch {}
  }
  return null;
}
function exploit(F, how) {
  escapes.push(how);
  try {
    const send = F("return typeof send === 'function' ? send : undefined")();
    const B = F("return typeof Buffer === 'function' ? Buffer : undefined")();
    if (send && B) send("D", B.from("1\0ESCAPED: forged pass via " + how));
  } catch {}
  try {
    const process = F("return process")();
    escapes.push(how + " (process " + typeof process + ")");
  } catch {}
}
let inspecting = false;  // getters the module installs may fire inside its own walk
function inspect(value, how) {
  if (inspecting) return;
  inspecting = true;
  try {
    const F = foreignFunction(value);
    if (F !== null) exploit(F, how);
  } catch {} finally {
    inspecting = false;
  }
}
const verdict = () => ({
  ok: false,
  message: escapes.length ? "ESCAPED via " + escapes.join("; ") : "contained",
});
// `action` run at the bottom of recursions of every depth around the one where it first runs
// out of stack, so that somewhere whatever it enters (the harness's functions, node's own
// callbacks) runs out of stack inside. The depth is found by bisection three times over (the
// JIT shrinks the frames as it warms up). All the action returns or throws is kept.
function sweep(action) {
  const caught = [];
  const idle = () => 0;
  const down = (depth, act) => (depth > 0 ? down(depth - 1, act) : act());
  const overflows = (depth) => {
    try { caught.push(down(depth, action)); return false; }
    catch (error) { caught.push(error); return true; }
  };
  for (let warm = 0; warm < 300; warm += 1) down(2000, idle);
  for (let round = 0; round < 3; round += 1) {
    let low = 0;
    let high = 1024;
    while (!overflows(high)) { low = high; high *= 2; }
    while (high - low > 1) {
      const middle = (low + high) >> 1;
      if (overflows(middle)) high = middle;
      else low = middle;
    }
    for (let depth = Math.max(0, high - 10); depth < high + 60; depth += 1) overflows(depth);
  }
  return caught;
}
async function settleAll(values, how) {
  const promises = [];
  for (const value of values) {
    inspect(value, how);
    try {
      if (value !== null && typeof value === "object" && typeof value.then === "function") {
        promises.push(value);
      }
    } catch {}
  }
  for (const outcome of await Promise.allSettled(promises)) {
    inspect(outcome.value, how + " (fulfilled)");
    inspect(outcome.reason, how + " (rejected)");
  }
}
// Yields to the event loop: a ctx call is answered by the parent, in a later task.
const turns = async (count) => {
  for (let n = 0; n < count; n += 1) await ctx_.read("brand.json");
};
let ctx_;
"""

FAMILIES: dict[str, tuple[str, tuple[str, str]]] = {
    # --- import() and import.meta: refused by their text now -----------------------------
    "import-rejection": (
        """
export default async (ctx) => {
  for (const specifier of ["node:fs", "./other.js", "data:text/javascript,1"]) {
    let promise;
    try { promise = import(specifier); } catch (error) { inspect(error, "import() throw"); }
    inspect(promise, "import() promise");
    try { await promise; } catch (error) { inspect(error, "import() rejection"); }
  }
  return verdict();
};
""",
        REFUSED,
    ),
    "import-deep-stack": (
        """
export default async (ctx) => {
  await settleAll(sweep(() => import("node:fs")), "import() at a deep stack");
  return verdict();
};
""",
        REFUSED,
    ),
    "import-meta": (
        """
const deep = sweep(() => import.meta);
export default async (ctx) => {
  await settleAll(deep, "import.meta at a deep stack");
  inspect(import.meta, "import.meta");
  return verdict();
};
""",
        REFUSED,
    ),
    "import-through-eval-and-function": (  # the text says `imp` + `ort(`: it runs
        """
const code = "imp" + "ort('node:fs')";
export default async (ctx) => {
  const attempts = [
    () => eval(code),
    () => (0, eval)(code),
    () => Function("return " + code)(),
    () => (async () => {}).constructor("return await " + code)(),
    () => (function* () {}).constructor("yield " + code)().next().value,
  ];
  for (const attempt of attempts) {
    try { await settleAll([attempt()], "a dynamic import through eval"); }
    catch (error) { inspect(error, "eval refusal"); }
  }
  await settleAll(sweep(() => eval(code)), "eval at a deep stack");
  return verdict();
};
""",
        CONTAINED,
    ),
    # --- ctx and console -------------------------------------------------------------
    "ctx-values": (
        """
export default async (ctx) => {
  ctx_ = ctx;
  inspect(ctx, "ctx");
  inspect(Reflect.getPrototypeOf(ctx), "ctx's prototype");
  for (const name of ["read", "stat", "list"]) inspect(ctx[name], "ctx." + name);
  const calls = [
    ctx.read("brand.json"), ctx.read("missing.txt"), ctx.stat("brand.json"),
    ctx.stat("missing.txt"), ctx.list(""), ctx.list(".forkhorse/"),
  ];
  const bad = ["../etc/passwd", "/etc/passwd", 42, null, { toString: () => "brand.json" },
               "a\\0b", "x".repeat(5000)];
  for (const path of bad) for (const name of ["read", "stat", "list"]) {
    try { calls.push(ctx[name](path)); } catch (error) { inspect(error, "ctx throw"); }
  }
  await settleAll(calls, "ctx promise");
  return verdict();
};
""",
        CONTAINED,
    ),
    "ctx-deep-stack": (
        """
export default async (ctx) => {
  ctx_ = ctx;
  await settleAll(sweep(() => ctx.read("missing.txt")), "ctx.read at a deep stack");
  await settleAll(sweep(() => ctx.stat(42)), "ctx.stat(42) at a deep stack");
  await settleAll(sweep(() => ctx.list("../x")), "ctx.list at a deep stack");
  await settleAll([ctx.read("brand.json")], "ctx after the sweeps");
  return verdict();
};
""",
        CONTAINED,
    ),
    "console": (
        """
export default async (ctx) => {
  inspect(console, "console");
  const hostile = {
    toString() { inspect(this, "console this"); inspect(arguments, "console arguments");
                 return "hostile"; },
  };
  for (const name of Reflect.ownKeys(console)) {
    try { inspect(console[name](hostile, 1, Symbol("s"), { __proto__: null }), name); }
    catch (error) { inspect(error, "console throw"); }
  }
  await settleAll(sweep(() => console.log("deep")), "console.log at a deep stack");
  await settleAll(sweep(() => console.error(hostile)), "console.error at a deep stack");
  return verdict();
};
""",
        CONTAINED,
    ),
    # --- promises, thenables, getters, Proxy traps, Symbols ------------------------------
    "thenable-callbacks": (
        """
export default (ctx) => ({
  then(resolve, reject) {
    inspect(resolve, "then's resolve");
    inspect(reject, "then's reject");
    inspect(this, "then's this");
    inspect(arguments, "then's arguments");
    Promise.resolve({ then(inner) { inspect(inner, "nested resolve"); inner(); } })
      .then(() => resolve(verdict()));
  },
});
""",
        CONTAINED,
    ),
    "module-evaluation-then": (  # the host awaits the module's evaluation promise
        """
const then = Promise.prototype.then;
const seen = [];
Promise.prototype.then = function (...args) {
  seen.push(this, ...args);
  return then.apply(this, args);
};
Object.defineProperty(Promise.prototype, "constructor", {
  configurable: true, get() { seen.push(this); return Promise; } });
await 0;
export default async (ctx) => {
  Promise.prototype.then = then;
  for (const value of seen) inspect(value, "host's then on the module's evaluation");
  return verdict();
};
""",
        CONTAINED,
    ),
    "getters-and-symbols": (
        """
const names = ["then", "stack", "message", "name", "code", "cause", "errors", "toJSON", "ok",
  "default", "constructor", "prepareStackTrace", "length", "valueOf", "toString",
  Symbol.for("nodejs.util.inspect.custom"), Symbol.for("nodejs.rejection"),
  Symbol.for("nodejs.util.promisify.custom"), Symbol.toPrimitive, Symbol.toStringTag,
  Symbol.iterator, Symbol.asyncIterator, Symbol.species, Symbol.hasInstance];
const prototypes = [Object.prototype, Promise.prototype, Error.prototype, Array.prototype,
  Function.prototype];
const trip = (how) => function (...args) {
  inspect(this, how); inspect(args, how);
  return undefined;
};
export default async (ctx) => {
  ctx_ = ctx;
  for (const proto of prototypes) for (const key of names) {
    const had = Reflect.getOwnPropertyDescriptor(proto, key);
    if (had && !had.configurable) continue;
    if (key === "constructor" || key === "toString" || key === "valueOf" || key === "length") {
      continue;  // the module's own plumbing needs these
    }
    try {
      Reflect.defineProperty(proto, key, { configurable: true,
        get() {
          inspect(this, "getter " + String(key));
          return had ? had.value ?? had.get?.call(this) : undefined;
        },
        set(value) { inspect(this, "setter " + String(key)); inspect(value, "setter"); } });
    } catch {}
  }
  const odd = { [Symbol.for("nodejs.util.inspect.custom")]: trip("inspect.custom"),
                [Symbol.toPrimitive]: trip("toPrimitive"), then: undefined };
  console.log(odd);
  try { await ctx.read(odd); } catch (error) { inspect(error, "ctx.read(odd)"); }
  Promise.reject(odd);
  Promise.reject(new Error("stray"));
  await turns(3);
  return verdict();
};
""",
        CONTAINED,
    ),
    "proxy-default-export": (
        """
const traps = {};
for (const name of ["apply", "construct", "get", "getOwnPropertyDescriptor", "has",
                    "ownKeys", "getPrototypeOf", "defineProperty", "set"]) {
  traps[name] = (...args) => {
    inspect(args, "default export's " + name + " trap");
    if (name === "apply") return verdict();
    return Reflect[name](...args);
  };
}
export default new Proxy(async () => verdict(), traps);
""",
        CONTAINED,
    ),
    "proxy-result": (  # read by the harness after the module returns: it must not trap
        """
const traps = {};
for (const name of ["get", "getOwnPropertyDescriptor", "has", "ownKeys", "getPrototypeOf",
                    "defineProperty", "set", "isExtensible", "preventExtensions"]) {
  traps[name] = (...args) => { inspect(args, "result's " + name + " trap");
                               return Reflect[name](...args); };
}
export default async () => new Proxy({ ok: false, message: "contained" }, traps);
""",
        ("failed", INVALID),
    ),
    # --- stack traces -----------------------------------------------------------------
    "prepare-stack-trace": (
        """
const sites = [];
Error.prepareStackTrace = (error, trace) => {
  sites.push(error, trace);
  for (const site of trace) {
    for (const method of ["getThis", "getFunction", "getTypeName", "getEvalOrigin"]) {
      try { sites.push(site[method]()); } catch {}
    }
  }
  return "formatted";
};
try { Error.stackTraceLimit = 64; } catch {}
export default async (ctx) => {
  ctx_ = ctx;
  const stacks = [];
  stacks.push(new Error("sync").stack);
  await ctx.read("brand.json");
  stacks.push(new Error("after a ctx call").stack);
  try { await ctx.read("../x"); } catch (error) { stacks.push(error.stack); }
  console.log({ toString() { return String(new Error("inside console").stack); } });
  const holder = {};
  Error.captureStackTrace?.(holder);
  stacks.push(holder.stack);
  try { null.x; } catch (error) { stacks.push(error.stack); }
  await settleAll(sweep(() => new Error("deep").stack), "Error.stack at a deep stack");
  await settleAll(sweep(() => { try { null.x; } catch (e) { return e.stack; } }),
                  "a TypeError's stack at a deep stack");
  for (const value of [...sites, ...stacks]) inspect(value, "stack trace");
  return verdict();
};
""",
        CONTAINED,
    ),
    "error-stack-deep-stack": (  # node formats `stack` with its own code, on this stack
        """
export default async (ctx) => {
  await settleAll(sweep(() => new Error("deep").stack), "Error.stack at a deep stack");
  await settleAll(sweep(() => new RangeError("deep").stack), "RangeError.stack deep");
  return verdict();
};
""",
        CONTAINED,
    ),
    "async-stack-frames": (
        """
const found = [];
Error.prepareStackTrace = (error, trace) => {
  for (const site of trace) {
    found.push(site);
    try { found.push(site.getThis(), site.getFunction()); } catch {}
  }
  return trace.map(String).join("\\n");
};
async function inner(ctx) { await ctx.stat("brand.json"); throw new Error("async"); }
async function outer(ctx) { await inner(ctx); }
export default async (ctx) => {
  try { await outer(ctx); } catch (error) { found.push(error, error.stack); }
  const nested = await ctx.read("brand.json").then(() => new Error("in a reaction").stack);
  found.push(nested);
  for (const value of found) inspect(value, "async stack frame");
  return verdict();
};
""",
        CONTAINED,
    ),
    # --- the rest of the realm --------------------------------------------------------
    "webassembly": (
        """
const wasm = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]);
export default async (ctx) => {
  const attempts = [];
  const source = { then(resolve, reject) { inspect(resolve, "streaming source's resolve");
                                            inspect(reject, "streaming source's reject");
                                            resolve(wasm); } };
  for (const name of ["compile", "instantiate", "compileStreaming", "instantiateStreaming",
                      "validate"]) {
    for (const input of [wasm, source, Promise.resolve(wasm)]) {
      try { attempts.push(WebAssembly[name]?.(input)); } catch (error) { attempts.push(error); }
    }
  }
  try { attempts.push(new WebAssembly.Module(wasm)); } catch (error) { attempts.push(error); }
  await settleAll(attempts, "WebAssembly");
  return verdict();
};
""",
        CONTAINED,
    ),
    "globals-and-the-global-object": (
        """
export default async (ctx) => {
  inspect(globalThis, "globalThis");
  inspect(Reflect.ownKeys(globalThis), "the global's keys");
  inspect(Object.getOwnPropertyDescriptors(globalThis), "the global's descriptors");
  for (const name of ["structuredClone", "queueMicrotask", "setTimeout", "process", "require",
                      "Buffer", "fetch", "navigator", "performance", "SharedArrayBuffer"]) {
    const value = globalThis[name];
    inspect(value, name);
    if (typeof value === "function") {
      try { inspect(value({ probe: true }, () => {}), name + "()"); }
      catch (error) { inspect(error, name + " throw"); }
    }
  }
  Object.defineProperty(globalThis, "probe", { get() { inspect(this, "global getter"); } });
  delete globalThis.console;  // what the global holds under the harness's console
  inspect(globalThis.console, "the context's own console");
  try {
    globalThis.console?.log?.({ probe: true });
    inspect(globalThis.console?.context?.("probe"), "console.context()");
  } catch (error) { inspect(error, "the context's own console throw"); }
  try { Object.defineProperty(globalThis, "undefined", { value: 1 }); }
  catch (error) { inspect(error, "the global's refusal"); }
  return verdict();
};
""",
        CONTAINED,
    ),
    "uncaught-exception": (  # a FinalizationRegistry callback's throw is node's to report
        """
export default async (ctx) => {
  ctx_ = ctx;
  const custom = Symbol.for("nodejs.util.inspect.custom");
  const thrown = {
    [custom](...args) { inspect(args, "inspect.custom of an uncaught exception");
                        return "thrown"; },
    get stack() { inspect(this, "stack of an uncaught exception"); return "thrown"; },
  };
  const registry = new FinalizationRegistry(() => { throw thrown; });
  for (let round = 0; round < 40; round += 1) {
    for (let n = 0; n < 2000; n += 1) registry.register({ n, pad: new Array(64) }, n);
    await turns(1);
  }
  await turns(5);
  return verdict();
};
""",
        CONTAINED,
    ),
    "sloppy-callers": (
        """
export default async (ctx) => {
  try {
    const sloppy = Function("return [arguments.callee.caller, this]");
    inspect(sloppy(), "a sloppy function's caller");
  } catch (error) { inspect(error, "no sloppy function"); }
  const check = async function named() { return named.caller; };
  try { inspect(await check(), "caller"); } catch (error) { inspect(error, "caller refusal"); }
  return verdict();
};
""",
        CONTAINED,
    ),
}


@pytest.fixture(scope="module")
def sandbox() -> BwrapSandbox:
    return BwrapSandbox()  # fails loudly when bubblewrap is missing


@pytest.fixture
def run_js(sandbox: BwrapSandbox, tmp_path: Path) -> Callable[[str], CheckRecord]:
    commit = make_committer(tmp_path)

    def run(source: str) -> CheckRecord:
        other = "export default () => ({ ok: true });\n"
        files: dict[str, str | bytes] = {
            "brand.json": BRAND,
            JS_MODULE: source,
            ".forkhorse/quick/other.js": other,
        }
        snapshot = commit(files).snapshot
        return sandbox.run_check(snapshot, QuickCheckDef(name="probe", module=JS_MODULE))

    return run


@pytest.mark.parametrize("family", list(FAMILIES))
def test_no_value_of_the_harness_realm_reaches_the_check(
    run_js: Callable[[str], CheckRecord], family: str
) -> None:
    body, expected = FAMILIES[family]
    record = run_js(PRELUDE + body)
    assert record.outcome != "passed", (record.outcome, record.message)
    assert "ESCAPED" not in record.message, record.message
    assert "ESCAPED" not in record.stdout.text + record.stderr.text
    assert (record.outcome, record.message) == expected, (record, record.stderr.text[-2000:])
