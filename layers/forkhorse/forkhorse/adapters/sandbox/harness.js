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
// `fetch` or timers, and every `import` (static or dynamic) is refused. Nothing from this
// realm reaches the module: `ctx` is built inside the context around one bridge that takes
// and gives only primitives, so no host object (and no host `Function`) is ever in reach.
// The permission model (no grants), the sandbox's empty network namespace and its seccomp
// filter still hold if that fails. The parent owns every budget and the deadline.
"use strict";

const net = require("node:net");
const vm = require("node:vm");
const { isProxy } = require("node:util").types;

const FRAME_HEADER_BYTES = 4;
const MESSAGE_LIMIT_BYTES = 4 * 1024;
const MESSAGE_CUT_NOTE = " [message cut at 4 KiB]";
const OP = { source: "M", loaded: "O", read: "R", stat: "S", list: "L", done: "D" };
const OP_INVALID = "I";
const OP_RAISED = "F";
const OP_IMPORT_FAILED = "X";
const REPLY = { none: 0x4e, text: 0x54, stat: 0x53, list: 0x4c };

const rpcFd = Number(process.argv[process.argv.length - 1]);
const channel = new net.Socket({ fd: rpcFd, readable: true, writable: true });
const pending = []; // resolvers of the requests in flight; the parent answers in order
let buffered = Buffer.alloc(0);
let hello = null;
let onHello = null;

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
// A check's stray rejected promise is its own business, as in a browser: it neither ends the
// check nor decides it.
process.on("unhandledRejection", () => {});

function send(op, data) {
  const payload = Buffer.concat([Buffer.from(hello.cap + op, "latin1"), data || Buffer.alloc(0)]);
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

// The bridge the context's ctx calls: primitives in, primitives out (through the context's
// own resolve/reject functions), so nothing of this realm leaks into the module's.
function bridge(op, path, resolve, reject) {
  if (typeof path !== "string") {
    reject("TypeError", "ctx paths are strings");
    return;
  }
  call(OP[op], Buffer.from(path, "utf8")).then((reply) => {
    const kind = reply[0];
    const body = reply.subarray(1);
    if (kind === REPLY.none) resolve(null);
    else if (kind === REPLY.text) resolve(body.toString("utf8"));
    else if (kind === REPLY.stat) {
      const [size, binary] = body.toString("latin1").split(",");
      resolve(Number(size), binary === "1");
    } else if (kind === REPLY.list) resolve(body.length ? body.toString("utf8") : "");
    else reject("Error", body.toString("utf8"));
  });
}

function log(stream, text) {
  if (typeof text === "string") stream.write(text + "\n");
}

// Runs inside the context: builds ctx and console from context-realm objects only.
const CONTEXT_SETUP = `(bridge, log) => {
  "use strict";
  const call = (op, path) => new Promise((resolve, reject) => bridge(op, path,
    (value, binary) => resolve(op === "stat" && value !== null ? { size: value, binary } :
      op === "list" ? (value === "" ? [] : value.split("\\0")) : value),
    (kind, text) => reject(kind === "TypeError" ? new TypeError(text) : new Error(text))));
  const ctx = Object.freeze({ __proto__: null,
    read: (path) => call("read", path),
    stat: (path) => call("stat", path),
    list: (prefix) => call("list", prefix) });
  const line = (values) => values.map((value) => { try { return String(value); }
    catch { return "[unprintable]"; } }).join(" ");
  const out = (...values) => log(1, line(values));
  const err = (...values) => log(2, line(values));
  globalThis.console = Object.freeze({ log: out, info: out, debug: out, warn: err, error: err });
  // Awaited here, in the module's realm, so a returned thenable meets no host function.
  const run = async (check, done) => {
    let result;
    try {
      result = await check(ctx);
    } catch {
      done(false);
      return;
    }
    done(true, result);
  };
  return run;
}`;

function makeContext() {
  const context = vm.createContext(Object.create(null), {
    codeGeneration: { strings: true, wasm: false },
  });
  const setup = vm.runInContext(CONTEXT_SETUP, context);
  const run = setup(bridge, (fd, text) => log(fd === 1 ? process.stdout : process.stderr, text));
  return { context, run };
}

function refuseImport() {
  throw new Error("a quick check imports nothing");
}

async function loadCheck(source, context) {
  const module = new vm.SourceTextModule(source, {
    identifier: hello.module,
    context,
    importModuleDynamically: refuseImport,
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
// own data properties; read once, as primitives.
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
    check = await loadCheck(reply.subarray(1).toString("utf8"), sandbox.context);
  } catch {
    finish(OP_IMPORT_FAILED);
    return;
  }
  const objectPrototype = vm.runInContext("Object.prototype", sandbox.context);
  send(OP.loaded);
  sandbox.run(check, (returned, result) => {
    let outcome = [OP_RAISED, ""];
    if (returned) {
      try {
        outcome = verdict(result, objectPrototype);
      } catch {
        outcome = [OP_INVALID, "shape"];
      }
    }
    finish(outcome[0], Buffer.from(outcome[1]));
  });
}

onHello = (text) => {
  main(text).catch(() => process.exit(1));
};
