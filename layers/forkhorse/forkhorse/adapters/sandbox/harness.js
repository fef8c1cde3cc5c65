// The JavaScript quick-check harness: the trusted start of each sandboxed `node` child.
//
// It runs as `node <flags> -e <this file> <fd>` with the capability socket preopened as <fd>,
// and speaks the Python harness's protocol (harness.py) on that socket only: frames are a
// 4-byte big-endian length and a payload; the parent's first frame is the hello (`key=value`
// lines); each child frame is the capability id, one op byte and its data; each reply starts
// with one kind byte. stdout and stderr are just logs: nothing printed there becomes a result.
//
// The check module is fetched through the capability (so its source is charged to the
// budget), then linked as an ES module in a fresh V8 context that holds only the language's
// own globals, a frozen `ctx` and a `console` that logs strings: no `process`, `require`,
// `fetch` or timers, and every `import` (static or dynamic) is refused. No object or function
// of this realm reaches the module's (issue 28). What crosses, and why it cannot carry one:
//
// - Values this realm hands to the context are primitives, or objects and errors built by
//   context code (CONTEXT_SETUP, evaluated before the module); `ctx` and `console` are built
//   there around two functions of this realm the module never holds (`bridge` and `log`).
// - The context calls into this realm only through those two (and `done`, at the end, from a
//   fresh microtask). Each call is wrapped on the context's side and what it throws is
//   dropped: it can only throw if the check's stack ran out inside it, and that RangeError is
//   of this realm. Each only queues (one `push`); the work runs later, on a shallow stack.
// - node runs its own code (of this realm) on the check's stack in three places, where an
//   overflow would throw this realm's RangeError: formatting an error's `stack` (its
//   prepareStackTrace callback), `import()` and `import.meta`. So the context captures no
//   stack traces (`Error.stackTraceLimit` is fixed at `undefined`: V8 then records none and
//   never asks node to format one), a module whose text holds `import(` or `import.` is
//   refused before it runs, and code generation from strings (`eval`, `Function`) is off so
//   no other text can. WebAssembly's compile and instantiate from a stream (node's code too)
//   are removed; compiling WebAssembly is off anyway.
// - The harness reads the module's result only as a plain, non-Proxy object of its realm
//   (own data properties, no trap or getter runs), and node's own awaiting of the module's
//   evaluation promise meets, at worst, the module's `then`, which V8 calls with resolving
//   functions of the module's realm (a promise job runs in its `then`'s realm).
// - A check's uncaught exception or unhandled rejection is ignored: node would otherwise
//   report it with util.inspect from this realm.
//
// Nothing of the harness is a global of this realm (it runs inside one closure). The
// permission model (no grants), the sandbox's empty network namespace and its seccomp filter
// still hold if all that fails. The parent owns every budget and the deadline.
"use strict";

(() => {
  const net = require("node:net");
  const vm = require("node:vm");
  const { isProxy } = require("node:util").types;

  const FRAME_HEADER_BYTES = 4;
  const MESSAGE_LIMIT_BYTES = 4 * 1024;
  const MESSAGE_CUT_NOTE = " [message cut at 4 KiB]";
  const OP = { source: "M", loaded: "O", done: "D" };
  const CTX_OP = { read: "R", stat: "S", list: "L" };
  const OP_INVALID = "I";
  const OP_RAISED = "F";
  const OP_IMPORT_FAILED = "X";
  const REPLY = { none: 0x4e, text: 0x54, stat: 0x53, list: 0x4c };
  // `import` then `(` or `.`, with white space and comments between: a dynamic import() or
  // import.meta. Matched anywhere in the text, strings and comments included (so it errs on
  // refusing), after anything but an identifier character (which would make it part of a
  // longer name: a keyword cannot be spelt with escapes).
  const DYNAMIC_IMPORT = /(?<![\w$])import(?:\s|\/\*[\s\S]*?\*\/|\/\/[^\n\r\u2028\u2029]*)*[(.]/;

  const rpcFd = Number(process.argv[process.argv.length - 1]);
  const channel = new net.Socket({ fd: rpcFd, readable: true, writable: true });
  const pending = []; // resolvers of the requests in flight; the parent answers in order
  const requests = []; // ctx calls the context queued, not yet sent
  const logs = []; // fd, text, fd, text...: console lines the context queued, not yet written
  let buffered = Buffer.alloc(0);
  let hello = null;
  let finished = false; // the verdict is being sent: no ctx call goes out after it

  channel.on("data", (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= FRAME_HEADER_BYTES) {
      const size = buffered.readUInt32BE(0);
      if (buffered.length < FRAME_HEADER_BYTES + size) return;
      const frame = buffered.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + size);
      buffered = buffered.subarray(FRAME_HEADER_BYTES + size);
      if (hello === null) onHello(frame.toString("utf8"));
      else if (pending.length) pending.shift()(frame);
    }
  });
  channel.on("error", () => process.exit(0));
  channel.on("end", () => process.exit(0));
  // A check's stray rejected promise or uncaught exception (a FinalizationRegistry callback's
  // throw) is its own business, as in a browser: it neither ends the check nor decides it,
  // and node does not report it (with util.inspect, from this realm).
  process.on("unhandledRejection", () => {});
  process.on("uncaughtException", () => {});

  function send(op, data) {
    const head = Buffer.from(hello.cap + op, "latin1");
    const payload = Buffer.concat([head, data || Buffer.alloc(0)]);
    const header = Buffer.alloc(FRAME_HEADER_BYTES);
    header.writeUInt32BE(payload.length, 0);
    channel.write(Buffer.concat([header, payload]));
  }

  function call(op, data) {
    return new Promise((resolve) => {
      pending.push(resolve);
      send(op, data);
    });
  }

  // The logs first, as the Python harness flushes them: a check's output counts against its
  // output limit before its verdict can end it.
  function drained(stream) {
    if (stream.writableLength === 0) return Promise.resolve();
    return new Promise((resolve) => stream.once("drain", resolve));
  }

  async function finish(op, data) {
    finished = true;
    writeLogs();
    await Promise.all([drained(process.stdout), drained(process.stderr)]);
    send(op, data);
    channel.end(() => process.exit(0));
  }

  function parseHello(text) {
    const fields = {};
    for (const line of text.split("\n")) {
      const at = line.indexOf("=");
      if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1);
    }
    return fields;
  }

  function dropPrivileges() {
    // bubblewrap's child starts as the namespace's root (mapped to the host's, to bind the
    // runtime); become the unprivileged uid for good so RLIMIT_NPROC binds.
    if (!hello.uid) return;
    process.setgroups([]);
    process.setgid(Number(hello.gid));
    process.setuid(Number(hello.uid));
    if (process.getuid() !== Number(hello.uid) || process.geteuid() !== Number(hello.uid)) {
      throw new Error("the quick-check child kept its privileges");
    }
  }

  function emptyEnvironment() {
    for (const key of Object.keys(process.env)) delete process.env[key];
  }

  // The bridge the context's ctx calls, on the check's stack: it only queues the call (its
  // one `push` comes after the tick that serves it), so a stack overflow in here leaves no
  // half-made request behind. The context's `resolve`/`reject` take primitives only.
  function bridge(op, path, resolve, reject) {
    process.nextTick(serveRequests);
    requests.push([op, path, resolve, reject]);
  }

  function serveRequests() {
    while (requests.length && !finished) {
      const [op, path, resolve, reject] = requests.shift();
      if (typeof path !== "string" || !Object.hasOwn(CTX_OP, op)) continue;
      call(CTX_OP[op], Buffer.from(path, "utf8")).then((reply) => {
        const kind = reply[0];
        const body = reply.subarray(1);
        if (kind === REPLY.none) resolve(null);
        else if (kind === REPLY.text) resolve(body.toString("utf8"));
        else if (kind === REPLY.stat) {
          const [size, binary] = body.toString("latin1").split(",");
          resolve(Number(size), binary === "1");
        } else if (kind === REPLY.list) resolve(body.length ? body.toString("utf8") : "");
        else reject(body.toString("utf8"));
      });
    }
  }

  // console's end in this realm, on the check's stack: it only queues the line.
  function log(fd, text) {
    process.nextTick(writeLogs);
    logs.push(fd, text);
  }

  function writeLogs() {
    while (logs.length) {
      const stream = logs.shift() === 1 ? process.stdout : process.stderr;
      const text = logs.shift();
      if (typeof text === "string") stream.write(text + "\n");
    }
  }

  // Runs inside the context before the module, so everything it builds and captures is the
  // context's own and untouched by the module.
  const CONTEXT_SETUP = `(bridge, log) => {
  "use strict";
  const { Object: Object_, Promise: Promise_, Error: Error_, TypeError: TypeError_,
          String: String_, Reflect: Reflect_, WebAssembly: WebAssembly_ } = globalThis;
  const apply = Reflect_.apply;
  const split = String_.prototype.split;
  // No stack traces: node formats one with its own code on the check's stack.
  Object_.defineProperty(Error_, "stackTraceLimit",
    { value: undefined, writable: false, enumerable: false, configurable: false });
  if (WebAssembly_) {
    delete WebAssembly_.compileStreaming;
    delete WebAssembly_.instantiateStreaming;
  }
  const shaped = (op, value, binary) => {
    if (op === "stat") return value === null ? null : { size: value, binary };
    if (op === "list") return value === "" ? [] : apply(split, value, ["\\0"]);
    return value;
  };
  const call = (op, path) => new Promise_((resolve, reject) => {
    if (typeof path !== "string") {
      reject(new TypeError_("ctx paths are strings"));
      return;
    }
    try {
      bridge(op, path, (value, binary) => resolve(shaped(op, value, binary)),
        (text) => reject(new Error_(text)));
      return;
    } catch {} // the harness's own RangeError: dropped, never the check's
    reject(new Error_("the ctx call could not be made (the stack ran out)"));
  });
  const ctx = Object_.freeze({ __proto__: null,
    read: (path) => call("read", path),
    stat: (path) => call("stat", path),
    list: (prefix) => call("list", prefix) });
  const line = (values) => values.map((value) => { try { return String_(value); }
    catch { return "[unprintable]"; } }).join(" ");
  const emit = (fd, values) => {
    const text = line(values);
    try { log(fd, text); } catch {} // as for bridge
  };
  const out = (...values) => emit(1, values);
  const err = (...values) => emit(2, values);
  globalThis.console = Object_.freeze({ log: out, info: out, debug: out, warn: err, error: err });
  // Awaited here, in the module's realm, so a returned thenable meets no host function.
  const run = async (check, done) => {
    let returned = false;
    let result;
    try {
      result = await check(ctx);
      returned = true;
    } catch {}
    try { done(returned, result); } catch {}
  };
  return Object_.freeze({ __proto__: null, run, objectPrototype: Object_.prototype,
    refusal: (text) => new Error_(text) });
}`;

  function makeContext() {
    const context = vm.createContext(Object.create(null), {
      codeGeneration: { strings: false, wasm: false },
    });
    const setup = vm.runInContext(CONTEXT_SETUP, context);
    const { run, objectPrototype, refusal } = setup(bridge, log);
    return { context, run, objectPrototype, refusal };
  }

  function refuseImport() {
    throw new Error("a quick check imports nothing");
  }

  async function loadCheck(source, sandbox) {
    if (DYNAMIC_IMPORT.test(source)) refuseImport();
    const module = new vm.SourceTextModule(source, {
      identifier: hello.module,
      context: sandbox.context,
      // Unreachable (the text was refused), and an error of the context's realm regardless.
      importModuleDynamically: () => {
        throw sandbox.refusal("a quick check imports nothing");
      },
    });
    await module.link(refuseImport);
    await module.evaluate();
    const check = module.namespace.default;
    if (typeof check !== "function") throw new Error("the module has no default function");
    return check;
  }

  function ownData(result, key) {
    const descriptor = Object.getOwnPropertyDescriptor(result, key);
    if (descriptor === undefined) return undefined;
    if (!("value" in descriptor)) throw new Error("accessor");
    return descriptor.value;
  }

  // {ok: boolean, message?: string}, a plain object of the module's realm with exactly those
  // own data properties; read once, as primitives (no trap or getter of the module runs).
  function verdict(result, objectPrototype) {
    if (typeof result !== "object" || result === null || isProxy(result)) {
      return [OP_INVALID, "shape"];
    }
    const prototype = Object.getPrototypeOf(result);
    if (prototype !== objectPrototype && prototype !== null) return [OP_INVALID, "shape"];
    const keys = Reflect.ownKeys(result);
    if (!keys.includes("ok") || keys.some((key) => key !== "ok" && key !== "message")) {
      return [OP_INVALID, "shape"];
    }
    const ok = ownData(result, "ok");
    const message = ownData(result, "message");
    if (typeof ok !== "boolean" || (message !== undefined && typeof message !== "string")) {
      return [OP_INVALID, "types"];
    }
    const flag = ok ? "1" : "0";
    if (message === undefined) return [OP.done, Buffer.from(flag)];
    return [OP.done, Buffer.concat([Buffer.from(flag + "\0"), withinLimit(message)])];
  }

  function withinLimit(message) {
    const encoded = Buffer.from(message, "utf8"); // lone surrogates become U+FFFD
    if (encoded.length <= MESSAGE_LIMIT_BYTES) return encoded;
    const room = MESSAGE_LIMIT_BYTES - Buffer.byteLength(MESSAGE_CUT_NOTE);
    let cut = room;
    while (cut > 0 && (encoded[cut] & 0xc0) === 0x80) cut -= 1; // a character boundary
    return Buffer.concat([encoded.subarray(0, cut), Buffer.from(MESSAGE_CUT_NOTE)]);
  }

  async function main(helloText) {
    hello = parseHello(helloText);
    dropPrivileges();
    emptyEnvironment();
    const reply = await call(OP.source);
    if (reply[0] !== REPLY.text) process.exit(0); // the parent already knows why
    let check;
    let sandbox;
    try {
      sandbox = makeContext();
      check = await loadCheck(reply.subarray(1).toString("utf8"), sandbox);
    } catch {
      finish(OP_IMPORT_FAILED);
      return;
    }
    send(OP.loaded);
    // Called by the context's `run` from a fresh microtask, so on a shallow stack.
    sandbox.run(check, (returned, result) => {
      let outcome = [OP_RAISED, ""];
      if (returned) {
        try {
          outcome = verdict(result, sandbox.objectPrototype);
        } catch {
          outcome = [OP_INVALID, "shape"];
        }
      }
      finish(outcome[0], Buffer.from(outcome[1]));
    });
  }

  function onHello(text) {
    main(text).catch(() => process.exit(1));
  }
})();
