// @ts-check
/**
 * dejavu's Node.js agent: `dejavu record` loads it into the Node.js programs it starts
 * (NODE_OPTIONS="--require <this file>"). It wraps the fs module's functions and tells
 * dejavu, over an inherited pipe, which line of JavaScript makes each file call; dejavu
 * turns that into the call stacks of the syscalls it records. Protocol and limits:
 * docs/agents.md.
 *
 * Rules this file keeps (the program must not notice it):
 * - the originals are kept, and called with the same `this`, the same arguments (same
 *   count) and `new.target`; their results, errors and exceptions reach the program
 *   unchanged, never caught and rethrown (the stack of an error thrown through a wrapper
 *   shows one more frame: this file's);
 * - any failure of the agent's own makes it call the original plainly; it never throws
 *   into the program; on a broken channel it unhooks itself (restores every original);
 * - without a valid channel (DEJAVU_AGENT_FD naming our pipe) it returns at once and
 *   wraps nothing.
 *
 * Runtime features (checked, never assumed): Error.captureStackTrace and structured
 * Error.prepareStackTrace (V8, every Node.js); v8.promiseHooks (Node.js >= 16.14 / 17.1;
 * without it fs.promises calls are not attributed); module.syncBuiltinESMExports (>= 12.12,
 * so `import { statSync } from 'fs'` sees the wrappers). Written for Node.js 20.
 */
'use strict';

const fs = require('fs');

/** Protocol message kinds (docs/agents.md, "Protocol"). */
const HELLO = 1;
const SITE = 2;
const ENTER = 3;
const EXIT = 4;
const ASYNC_BEGIN = 5;
const ASYNC_END = 6;
const DROPPED = 7;
const MAIN_DONE = 8;
const LANG_JS = 1;
/** PIPE_BUF: a write up to this size is atomic, so agents' messages never interleave. */
const MAX_WRITE = 4096;
/** The program's own frames per call site. */
const FRAMES = 4;
/**
 * Frames per call site in all: Node.js's own between the wrapped call and the program's
 * code (the module loader's for a require(): node:internal/modules/...), innermost first,
 * then the program's.
 */
const MAX_SITE = 24;
/** Frames captured when the innermost is Node.js's own (module loading): its frames and
 * the program's line further out. */
const DEEP_FRAMES = 40;
/** What a frame is (kindOf). */
const OWN = 0;
const RUNTIME = 1;
const AGENT = 2;
/** Longest function name and file name sent, in bytes (a site must fit one write). */
const MAX_NAME = 200;
const MAX_FILE = 700;
/** Longest path sent with an asynchronous call (longer ones are not attributed). */
const MAX_PATH = 3000;

const SELF = __filename;
const hasOwn = Object.prototype.hasOwnProperty;
const ReflectApply = Reflect.apply;
const ReflectConstruct = Reflect.construct;
const NativePromise = Promise;
/** Taken at load, so a program that replaces it never sees the agent call its version. */
const captureStackTrace = Error.captureStackTrace;
/** Likewise (a program may fake timers): what the main-module watch uses. */
const nextTick = process.nextTick;
const setImmediateOrig = setImmediate;
const rawListeners = process.rawListeners;
const listenerCount = process.listenerCount;

/** The originals the agent itself uses, taken before anything is wrapped. */
const writeSync = fs.writeSync;
const fstatSync = fs.fstatSync;
const readlinkSync = fs.readlinkSync;

/** Whether wrappers report (false before start, after unhook, on a broken channel). */
let on = false;
let fd = -1;
let pid = 0;
/** This thread's id (the main thread's is the pid; a worker's is read once). */
let tid = 0;
/** This agent's namespace for site and request numbers: its thread id. */
let ns = 0;
/** Wrapped synchronous calls in progress on this thread (the isolate). */
let depth = 0;
/** > 0 while a wrapper runs an original: fs calling fs reports nothing more. */
let busy = 0;
let siteSeq = 0;
let reqSeq = 0;
/** Messages that could not be written (pipe full), not yet reported. */
let dropped = 0;
let droppedTotal = 0;
let messages = 0;

/** The message being built; written out by flush(). */
const out = Buffer.allocUnsafe(MAX_WRITE);
let pos = 0;
/** Sites defined in the unwritten part of `out`: forgotten if the write fails. */
/** @type {string[]} */
const unsent = [];
/** call-site key -> site number */
/** @type {Map<string, number>} */
const sites = new Map();
/** descriptor -> [path argument, cwd] of the open that made it (for fd-based async calls) */
/** @type {Map<number, [unknown, string]>} */
const fdPaths = new Map();
/** promise -> request number, for fs.promises calls in flight */
/** @type {Map<object, number>} */
const inFlight = new Map();
/** @type {null | (() => void)} */
let stopPromiseHook = null;
/** Promises that settled while a promise wrapper ran its original (before it knew them). */
/** @type {Set<object> | null} */
let settledEarly = null;
/** [object, key, original, wrapper] of everything installed, for unhook. */
/** @type {Array<[any, string, Function, Function]>} */
const installed = [];

// ---------------------------------------------------------------------------------------
// The channel

/**
 * The descriptor dejavu gave us, or -1. It must be the pipe dejavu made (same inode): a
 * number the program reused for one of its own files must never receive our bytes. The
 * fstat is let through the seccomp filter untraced.
 * @returns {number}
 */
function channelFd() {
  const v = process.env.DEJAVU_AGENT_FD;
  if (typeof v !== 'string') return -1;
  const m = /^(\d{1,7}):(\d{1,20})$/.exec(v);
  if (m === null) return -1;
  const n = Number(m[1]);
  try {
    const st = fstatSync(n, { bigint: true });
    if (!st.isFIFO() || st.ino !== BigInt(m[2])) return -1;
  } catch {
    return -1;
  }
  return n;
}

/** @param {number} v */
function u8(v) {
  out[pos++] = v;
}
/** @param {number} v */
function u16(v) {
  out[pos++] = v & 0xff;
  out[pos++] = (v >>> 8) & 0xff;
}
/** @param {number} v */
function u32(v) {
  out[pos++] = v & 0xff;
  out[pos++] = (v >>> 8) & 0xff;
  out[pos++] = (v >>> 16) & 0xff;
  out[pos++] = (v >>> 24) & 0xff;
}
/** @param {Buffer} b */
function bytes(b) {
  u16(b.length);
  b.copy(out, pos);
  pos += b.length;
}

/**
 * Starts a message of `kind` that needs at most `size` bytes; flushes first when the
 * current write would grow past MAX_WRITE. Returns where its length goes.
 * @param {number} kind
 * @param {number} size
 */
function begin(kind, size) {
  if (pos + size > MAX_WRITE) flush();
  const at = pos;
  pos += 2;
  u8(kind);
  messages++;
  return at;
}
/** @param {number} at */
function end(at) {
  const len = pos - at - 2;
  out[at] = len & 0xff;
  out[at + 1] = len >>> 8;
}

/**
 * Writes the messages built so far in one write. The pipe is non-blocking and a write of
 * at most PIPE_BUF bytes is all or nothing: when the pipe is full the messages are
 * dropped (and counted), never waited for.
 * @returns {boolean} whether they were written
 */
function flush() {
  if (pos === 0) return true;
  if (dropped > 0 && pos + 15 <= MAX_WRITE) {
    const at = pos;
    pos += 2;
    u8(DROPPED);
    u32(pid);
    u32(ns);
    u32(dropped);
    end(at);
  }
  const n = pos;
  pos = 0;
  try {
    writeSync(fd, out, 0, n);
    dropped = 0;
    unsent.length = 0;
    return true;
  } catch (e) {
    const code = e !== null && typeof e === 'object' ? /** @type {any} */ (e).code : undefined;
    if (code === 'EAGAIN') {
      dropped++;
      droppedTotal++;
      // Their definitions never arrived: define them again at their next use.
      for (const k of unsent) sites.delete(k);
      unsent.length = 0;
      return false;
    }
    // EBADF, EPIPE...: the channel is gone; stop reporting, restore everything.
    unhook();
    return false;
  }
}

/** Throws away a message half built when something of ours failed. */
function discard() {
  for (const k of unsent) sites.delete(k);
  unsent.length = 0;
  pos = 0;
}

// ---------------------------------------------------------------------------------------
// Call sites

/** @param {Error} _e @param {NodeJS.CallSite[]} cs */
function structured(_e, cs) {
  return cs;
}

/** Reused holder for captured stacks (a fresh object per call costs a map transition). */
const holder = {};

/**
 * Captures the stack under `fn` (frames above it excluded) as CallSites, with the
 * program's Error.stackTraceLimit and Error.prepareStackTrace put back exactly as they
 * were, even when the program has made them odd.
 * @param {Function} fn
 * @param {number} limit
 * @returns {NodeJS.CallSite[] | null}
 */
function callSites(fn, limit) {
  /** @type {any} */
  const E = Error;
  const hadLimit = hasOwn.call(E, 'stackTraceLimit');
  const hadPrep = hasOwn.call(E, 'prepareStackTrace');
  const oldLimit = E.stackTraceLimit;
  const oldPrep = E.prepareStackTrace;
  let setLimit = false;
  let setPrep = false;
  try {
    E.stackTraceLimit = limit;
    setLimit = true;
    E.prepareStackTrace = structured;
    setPrep = true;
    captureStackTrace(holder, fn); // (a V8 builtin: it needs no receiver)
    const cs = /** @type {any} */ (holder).stack;
    return Array.isArray(cs) ? cs : null;
  } finally {
    if (setPrep) {
      if (hadPrep) E.prepareStackTrace = oldPrep;
      else delete E.prepareStackTrace;
    }
    if (setLimit) {
      if (hadLimit) E.stackTraceLimit = oldLimit;
      else delete E.stackTraceLimit;
    }
  }
}

/**
 * What a frame is: this agent's, Node.js's own (node: and internal/ modules, builtins
 * without a file), or the program's.
 * @param {string | null | undefined} file
 */
function kindOf(file) {
  if (typeof file !== 'string') return RUNTIME;
  if (file === SELF) return AGENT;
  if (file.startsWith('node:') || file.startsWith('internal/')) return RUNTIME;
  return OWN;
}

/**
 * The site number of the program's call into the wrapper `fn`, defined to dejavu on
 * first use: Node.js's frames up to the program's first (they say what made the call for
 * the program: the module loader, for a require()), then the program's innermost frames
 * (at most FRAMES), MAX_SITE in all; without a frame of the program's, Node.js's alone.
 * 0 when there is no frame at all.
 * @param {Function} fn
 * @returns {number}
 */
function siteOf(fn) {
  let cs = callSites(fn, FRAMES);
  if (cs === null) return 0;
  if (cs.length === FRAMES && kindOf(cs[0].getFileName()) !== OWN) {
    // Node.js's own call (the module loader's, on behalf of a require()): its frames,
    // and the program's line further out.
    cs = callSites(fn, DEEP_FRAMES);
    if (cs === null) return 0;
  }
  const picked = pick(cs);
  if (picked.length === 0) return 0;
  let key = '';
  for (const c of picked) {
    const f = c.getFileName();
    key += (typeof f === 'string' ? f : '?' + functionOf(c)) + ':' + c.getLineNumber() + ':' + c.getColumnNumber() + '\n';
  }
  const id = sites.get(key);
  if (id !== undefined) return id;
  return define(key, picked);
}

/**
 * The frames of a site, innermost first: Node.js's up to the program's first, then at
 * most FRAMES of the program's (Node.js's between them skipped), MAX_SITE in all (the
 * outermost of Node.js's go first); never this agent's.
 * @param {NodeJS.CallSite[]} cs
 * @returns {NodeJS.CallSite[]}
 */
function pick(cs) {
  /** @type {NodeJS.CallSite[]} */
  const inner = [];
  /** @type {NodeJS.CallSite[]} */
  const own = [];
  for (let i = 0; i < cs.length && own.length < FRAMES; i++) {
    const k = kindOf(cs[i].getFileName());
    if (k === OWN) own.push(cs[i]);
    else if (k === RUNTIME && own.length === 0 && inner.length < MAX_SITE) inner.push(cs[i]);
  }
  if (inner.length === 0) return own;
  const over = inner.length + own.length - MAX_SITE;
  if (over > 0) inner.length -= over;
  for (const c of own) inner.push(c);
  return inner;
}

/** @param {string} s @param {number} max */
function utf8(s, max) {
  const b = Buffer.from(s, 'utf8');
  return b.length <= max ? b : b.subarray(0, max);
}

/** @type {typeof import('url') | null} */
let urlModule = null;

/** @param {string} f */
function fileOf(f) {
  if (f.startsWith('file://')) {
    try {
      if (urlModule === null) urlModule = require('url');
      return urlModule.fileURLToPath(f);
    } catch {
      return f;
    }
  }
  return f;
}

/** @param {NodeJS.CallSite} c */
function functionOf(c) {
  let name = c.getFunctionName() || c.getMethodName() || '';
  if (name === '') return '<anonymous>';
  if (!c.isToplevel()) {
    const type = c.getTypeName();
    if (type && type !== 'Object' && !name.startsWith(type + '.')) name = type + '.' + name;
  }
  return name;
}

/**
 * Gives `key` a number and queues its definition (sent with the message that uses it).
 * @param {string} key
 * @param {NodeJS.CallSite[]} picked its frames (see pick)
 */
function define(key, picked) {
  const id = ++siteSeq;
  /** @type {Array<[Buffer, Buffer, number, number, boolean]>} */
  const frames = [];
  let size = 3 + 14;
  for (const c of picked) {
    const f = c.getFileName();
    const fn = utf8(functionOf(c), MAX_NAME);
    const file = typeof f === 'string' ? utf8(fileOf(f), MAX_FILE) : Buffer.alloc(0);
    frames.push([fn, file, c.getLineNumber() || 0, c.getColumnNumber() || 0, kindOf(f) === OWN]);
    size += 12 + fn.length + file.length;
  }
  // The site and the ENTER using it fit one write: the program's frames (at most 4 x 912
  // bytes) always do; Node.js's outermost go first when names are long.
  for (let i = frames.length - 1; i >= 0 && size > MAX_WRITE - 21; i--) {
    if (frames[i][4]) continue;
    size -= 12 + frames[i][0].length + frames[i][1].length;
    frames.splice(i, 1);
  }
  const at = begin(SITE, size);
  u32(pid);
  u32(ns);
  u32(id);
  u8(LANG_JS);
  u8(frames.length);
  for (const [fn, file, line, col] of frames) {
    u32(line);
    u32(col);
    bytes(fn);
    bytes(file);
  }
  end(at);
  sites.set(key, id);
  unsent.push(key);
  return id;
}

// ---------------------------------------------------------------------------------------
// Paths of asynchronous calls, resolved as dejavu resolves syscall paths: absolute against
// the working directory, '.' and empty components removed, '..' kept.

/**
 * @param {unknown} p a path argument (string, Buffer, file: URL)
 * @param {string} cwd
 * @returns {Buffer | null}
 */
function resolvePath(p, cwd) {
  /** @type {Buffer} */
  let b;
  if (typeof p === 'string') b = Buffer.from(p, 'utf8');
  else if (p instanceof Uint8Array) b = Buffer.from(p.buffer, p.byteOffset, p.byteLength);
  else if (p instanceof URL) {
    if (p.protocol !== 'file:') return null;
    try {
      if (urlModule === null) urlModule = require('url');
      b = Buffer.from(urlModule.fileURLToPath(p), 'utf8');
    } catch {
      return null;
    }
  } else return null;
  if (b.length === 0) return null;
  // latin1 maps bytes one to one, so any byte path survives the round trip.
  let s = b.toString('latin1');
  if (s[0] !== '/') s = Buffer.from(cwd, 'utf8').toString('latin1') + '/' + s;
  const parts = s.split('/');
  let r = '';
  for (const c of parts) {
    if (c === '' || c === '.') continue;
    r += '/' + c;
  }
  if (r === '') r = '/';
  const res = Buffer.from(r, 'latin1');
  return res.length <= MAX_PATH ? res : null;
}

/**
 * The paths an asynchronous call will name in its syscalls, from its arguments.
 * @param {string} spec 'p' path, 'pp' two paths, 'p1' the second argument,
 *   'f' a descriptor, 'pf' a path or a descriptor, '' none
 * @param {IArguments | unknown[]} args
 * @returns {Buffer[]}
 */
function pathsOf(spec, args) {
  if (spec === '') return [];
  const cwd = process.cwd();
  /** @type {Buffer[]} */
  const r = [];
  /** @param {unknown} a */
  const add = (a) => {
    if (typeof a === 'number') {
      const e = fdPaths.get(a);
      if (e === undefined) return;
      const b = resolvePath(e[0], e[1]);
      if (b !== null) r.push(b);
      return;
    }
    const b = resolvePath(a, cwd);
    if (b !== null) r.push(b);
  };
  if (spec === 'p' || spec === 'pf' || spec === 'f') {
    if (spec === 'p' && typeof args[0] === 'number') return r;
    if (spec === 'f' && typeof args[0] !== 'number') return r;
    add(args[0]);
  } else if (spec === 'pp') {
    add(args[0]);
    add(args[1]);
  } else if (spec === 'p1') {
    add(args[1]);
  }
  return r;
}

/**
 * Remembers what `fd` was opened with, for later fd-based asynchronous calls.
 * @param {unknown} fdv
 * @param {unknown} path
 */
function rememberFd(fdv, path) {
  try {
    if (typeof fdv !== 'number') return;
    if (fdPaths.size > 65536) fdPaths.clear();
    // A Buffer may change after the call: keep a copy.
    const p = path instanceof Uint8Array ? Buffer.from(path) : path;
    fdPaths.set(fdv, [p, process.cwd()]);
  } catch {
    // (process.cwd() throws when the directory was removed)
  }
}

// ---------------------------------------------------------------------------------------
// Error stacks: a wrapper sits between the program and fs, so an error thrown through it
// carries one more frame (this file's) in its stack. The wrapper does not catch it (a
// rethrow would move the throw site Node.js prints above an uncaught error to this file);
// it raises Error.stackTraceLimit by one while the original runs, so the program's own
// frames are all still there.

/** Raises Error.stackTraceLimit by one (our frame); returns what to restore, or null. */
function raiseLimit() {
  try {
    const lim = Error.stackTraceLimit;
    if (typeof lim !== 'number' || !hasOwn.call(Error, 'stackTraceLimit')) return null;
    Error.stackTraceLimit = lim + 1;
    return lim;
  } catch {
    return null;
  }
}

/** @param {number | null} lim */
function restoreLimit(lim) {
  if (lim === null) return;
  try {
    Error.stackTraceLimit = lim;
  } catch {
    // (it was writable a moment ago)
  }
}

// ---------------------------------------------------------------------------------------
// Wrappers

/**
 * Makes `w` look like `o`: name, length, and every other own property (realpathSync.native,
 * util.promisify.custom on fs.exists, ...), shared rather than copied where they are
 * objects.
 * @param {Function} o
 * @param {Function} w
 */
function lookAlike(o, w) {
  for (const k of Reflect.ownKeys(o)) {
    if (k === 'prototype' || k === 'caller' || k === 'arguments') continue;
    const d = Object.getOwnPropertyDescriptor(o, k);
    if (d !== undefined) {
      try {
        Object.defineProperty(w, k, d);
      } catch {
        // a non-configurable property of the wrapper: keep its own
      }
    }
  }
  if (hasOwn.call(o, 'prototype')) {
    try {
      /** @type {any} */ (w).prototype = /** @type {any} */ (o).prototype;
    } catch {
      // ignore
    }
  }
}

/**
 * A synchronous API: ENTER before the original, EXIT after it, whatever happens.
 * @param {Function} o
 * @param {string} name
 */
function wrapSync(o, name) {
  const trackOpen = name === 'openSync';
  const trackClose = name === 'closeSync';
  /** @this {unknown} */
  const w = function () {
    if (new.target !== undefined) return ReflectConstruct(o, arguments, new.target);
    if (!on) return ReflectApply(o, this, arguments);
    // Called by fs itself (readFileSync calls fs.openSync): the outer call reports.
    let site = 0;
    const d = depth;
    if (busy === 0) {
      try {
        site = siteOf(w);
        if (site !== 0) {
          const at = begin(ENTER, 21);
          u32(pid);
          u32(tid);
          u32(ns);
          u32(site);
          u16(d);
          end(at);
          if (!flush()) site = 0;
        }
      } catch {
        discard();
        site = 0;
      }
    }
    if (site !== 0) depth = d + 1;
    busy++;
    const lim = raiseLimit();
    try {
      const r = ReflectApply(o, this, arguments);
      if (trackOpen) rememberFd(r, arguments[0]);
      return r;
    } finally {
      restoreLimit(lim);
      busy--;
      if (trackClose) fdPaths.delete(arguments[0]);
      if (site !== 0) {
        depth = d;
        try {
          const at = begin(EXIT, 13);
          u32(pid);
          u32(tid);
          u16(d);
          end(at);
          flush();
        } catch {
          discard();
        }
      }
    }
  };
  lookAlike(o, w);
  return w;
}

/**
 * Reports an asynchronous call: ASYNC_BEGIN per path. Returns its request number, or 0.
 * @param {Function} w the wrapper (frames above it are not the program's)
 * @param {string} spec
 * @param {IArguments | unknown[]} args
 */
function asyncBegin(w, spec, args) {
  try {
    const paths = pathsOf(spec, args);
    if (paths.length === 0) return 0;
    const site = siteOf(w);
    if (site === 0) return 0;
    const req = (reqSeq = (reqSeq + 1) >>> 0 || 1);
    for (const p of paths) {
      const at = begin(ASYNC_BEGIN, 25 + p.length);
      u32(pid);
      u32(tid);
      u32(ns);
      u32(site);
      u32(req);
      bytes(p);
      end(at);
    }
    return flush() ? req : 0;
  } catch {
    discard();
    return 0;
  }
}

/** @param {number} req */
function asyncEnd(req) {
  if (req === 0 || !on) return;
  try {
    const at = begin(ASYNC_END, 15);
    u32(pid);
    u32(ns);
    u32(req);
    end(at);
    flush();
  } catch {
    discard();
  }
}

/**
 * A callback API: ASYNC_BEGIN when called, ASYNC_END when fs calls back (just before the
 * program's callback runs, with the same `this` and arguments).
 * @param {Function} o
 * @param {string} name
 * @param {string} spec
 */
function wrapCallback(o, name, spec) {
  const trackOpen = name === 'open';
  const trackClose = name === 'close';
  /** @this {unknown} */
  const w = function () {
    if (new.target !== undefined) return ReflectConstruct(o, arguments, new.target);
    if (!on) return ReflectApply(o, this, arguments);
    const n = arguments.length;
    const req = busy === 0 && n > 0 && typeof arguments[n - 1] === 'function' ? asyncBegin(w, spec, arguments) : 0;
    if (trackClose) fdPaths.delete(arguments[0]);
    if (req === 0 && !(trackOpen && n > 0 && typeof arguments[n - 1] === 'function')) {
      // Nothing to report: the original, with the wrapper's frame accounted for.
      busy++;
      const lim = raiseLimit();
      try {
        return ReflectApply(o, this, arguments);
      } finally {
        restoreLimit(lim);
        busy--;
      }
    }
    const cb = arguments[n - 1];
    const path = arguments[0];
    const args = new Array(n);
    for (let i = 0; i < n; i++) args[i] = arguments[i];
    /** @this {unknown} */
    args[n - 1] = function () {
      asyncEnd(req);
      if (trackOpen && arguments[0] == null) rememberFd(arguments[1], path);
      return ReflectApply(cb, this, arguments);
    };
    busy++;
    const lim = raiseLimit();
    let queued = false;
    try {
      const r = ReflectApply(o, this, args);
      queued = true;
      return r;
    } finally {
      restoreLimit(lim);
      busy--;
      // Thrown before anything was queued (a bad argument): nothing will call back.
      if (!queued) asyncEnd(req);
    }
  };
  lookAlike(o, w);
  return w;
}

/**
 * Settled promises end their calls. A promise hook sees the promise settle without
 * touching it: a `.then()` of ours would mark a rejection handled (and the program's
 * unhandled rejection would vanish), or add a microtask tick to the program's chain.
 * @returns {boolean} whether promise calls can be followed
 */
function promiseHook() {
  if (stopPromiseHook !== null) return true;
  try {
    const v8 = require('v8');
    const ph = /** @type {any} */ (v8).promiseHooks;
    if (!ph || typeof ph.onSettled !== 'function') return false;
    stopPromiseHook = ph.onSettled((/** @type {object} */ p) => {
      if (settledEarly !== null) settledEarly.add(p);
      if (inFlight.size === 0) return;
      const req = inFlight.get(p);
      if (req === undefined) return;
      inFlight.delete(p);
      asyncEnd(req);
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * An fs.promises API: ASYNC_BEGIN when called, ASYNC_END when its promise settles.
 * @param {Function} o
 * @param {string} name
 * @param {string} spec
 */
function wrapPromise(o, name, spec) {
  // A method, like the async function it stands for: no prototype, not a constructor.
  // (Its body is inline: a helper would be one more frame in the program's stacks.)
  const w = {
    /** @this {unknown} */
    [name]() {
      if (!on) return ReflectApply(o, this, arguments);
      const req = busy === 0 && promiseHook() ? asyncBegin(w, spec, arguments) : 0;
      busy++;
      // An async function that fails before its first await settles during the call.
      const early = req === 0 ? null : new Set();
      settledEarly = early;
      const lim = raiseLimit();
      /** @type {unknown} */
      let p;
      let returned = false;
      try {
        p = ReflectApply(o, this, arguments);
        returned = true;
      } finally {
        restoreLimit(lim);
        settledEarly = null;
        busy--;
        if (!returned) asyncEnd(req);
      }
      if (req !== 0) {
        if (p instanceof NativePromise && early !== null && !early.has(p)) {
          if (inFlight.size > 65536) inFlight.clear();
          inFlight.set(p, req);
        } else asyncEnd(req);
      }
      return p;
    },
  }[name];
  lookAlike(o, w);
  return w;
}

/**
 * Replaces obj[key] with make(original), when it is a function in a plain writable
 * property (anything else is left alone).
 * @param {any} obj
 * @param {string} key
 * @param {(o: Function) => Function} make
 */
function install(obj, key, make) {
  try {
    const d = Object.getOwnPropertyDescriptor(obj, key);
    if (d === undefined || !('value' in d) || !d.writable || typeof d.value !== 'function') return;
    const o = d.value;
    const w = make(o);
    // A wrapper must look like its original down to having a prototype or not.
    if (hasOwn.call(o, 'prototype') !== hasOwn.call(w, 'prototype')) return;
    obj[key] = w;
    installed.push([obj, key, o, w]);
  } catch {
    // leave it
  }
}

// Which path(s) each asynchronous call names in its syscalls (see pathsOf).
/** @type {Record<string, string>} */
const CALLBACK = {
  access: 'p', appendFile: 'pf', chmod: 'p', chown: 'p', close: 'f', copyFile: 'pp',
  cp: 'pp', exists: 'p', fchmod: 'f', fchown: 'f', fdatasync: 'f', fstat: 'f', fsync: 'f',
  ftruncate: 'f', futimes: 'f', lchown: 'p', link: 'pp', lstat: 'p', lutimes: 'p',
  mkdir: 'p', mkdtemp: '', open: 'p', opendir: 'p', read: 'f', readdir: 'p',
  readFile: 'pf', readlink: 'p', readv: 'f', realpath: 'p', rename: 'pp', rm: 'p',
  rmdir: 'p', stat: 'p', statfs: 'p', symlink: 'p1', truncate: 'p', unlink: 'p',
  utimes: 'p', write: 'f', writeFile: 'pf', writev: 'f',
};
/** @type {Record<string, string>} */
const PROMISES = {
  access: 'p', appendFile: 'p', chmod: 'p', chown: 'p', copyFile: 'pp', cp: 'pp',
  lchown: 'p', link: 'pp', lstat: 'p', lutimes: 'p', mkdir: 'p', mkdtemp: '', open: 'p',
  opendir: 'p', readdir: 'p', readFile: 'p', readlink: 'p', realpath: 'p', rename: 'pp',
  rm: 'p', rmdir: 'p', stat: 'p', statfs: 'p', symlink: 'p1', truncate: 'p', unlink: 'p',
  utimes: 'p', writeFile: 'p',
};
const SYNC = [
  'accessSync', 'appendFileSync', 'chmodSync', 'chownSync', 'closeSync', 'copyFileSync',
  'cpSync', 'existsSync', 'fchmodSync', 'fchownSync', 'fdatasyncSync', 'fstatSync',
  'fsyncSync', 'ftruncateSync', 'futimesSync', 'lchownSync', 'linkSync', 'lstatSync',
  'lutimesSync', 'mkdirSync', 'mkdtempSync', 'openSync', 'opendirSync', 'readSync',
  'readdirSync', 'readFileSync', 'readlinkSync', 'readvSync', 'realpathSync',
  'renameSync', 'rmSync', 'rmdirSync', 'statSync', 'statfsSync', 'symlinkSync',
  'truncateSync', 'unlinkSync', 'utimesSync', 'writeFileSync', 'writeSync', 'writevSync',
];

/** ESM imports of 'fs' read the CommonJS exports: keep them in step with ours. */
function syncESM() {
  try {
    const m = require('module');
    if (typeof m.syncBuiltinESMExports === 'function') m.syncBuiltinESMExports();
  } catch {
    // older Node.js: ESM imports keep the originals
  }
}

/** Restores every original still in place, and stops reporting. Safe to call twice. */
function unhook() {
  on = false;
  pos = 0;
  for (let i = installed.length - 1; i >= 0; i--) {
    const [obj, key, o, w] = installed[i];
    try {
      // The program may have replaced it in turn: then its replacement stays.
      if (obj[key] === w) obj[key] = o;
    } catch {
      // leave it
    }
  }
  installed.length = 0;
  if (stopPromiseHook !== null) {
    try {
      stopPromiseHook();
    } catch {
      // ignore
    }
    stopPromiseHook = null;
  }
  inFlight.clear();
  syncESM();
}

// ---------------------------------------------------------------------------------------
// The end of the main module: MAIN_DONE, once, from the main thread, as soon as the main
// module has run (CommonJS: right after its synchronous evaluation, before the callbacks
// it queued; an ES module: once it and its top-level await have been evaluated), so
// dejavu can tell start-up from the rest.

/** 'exit' listeners there before the main module ran (Node.js's own watch is not). */
/** @type {Function[]} */
let exitListenersBefore = [];

/** Sends MAIN_DONE (once: every path here runs once). */
function mainDone() {
  if (!on) return;
  try {
    const at = begin(MAIN_DONE, 11);
    u32(pid);
    u32(ns);
    end(at);
    flush();
  } catch {
    discard();
  }
}

/**
 * Node.js's watch of an ES module main still running: while the ESM loader evaluates the
 * main module (and its top-level await), it keeps a function named handleProcessExit on
 * 'exit' (Node.js 18 to 22: internal/modules/run_main), and takes it off once the module
 * has been evaluated. null when there is none.
 * @returns {Function | null}
 */
function esmWatch() {
  const ls = ReflectApply(rawListeners, process, ['exit']);
  for (const f of ls) {
    if (typeof f === 'function' && f.name === 'handleProcessExit' && !exitListenersBefore.includes(f)) return f;
  }
  return null;
}

/**
 * Runs first after the main module's synchronous evaluation (a tick queued before the
 * main module ran comes before the ticks it queued; this one does nothing the program can
 * see, so the order of its own is unchanged).
 */
function afterMain() {
  try {
    if (!on) return;
    const watch = esmWatch();
    if (watch === null) {
      // A CommonJS main (or -e, stdin) has run: MAIN_DONE now, before anything the
      // main module queued (its ticks, promises and immediates) runs: those are the
      // event loop's work, as a request handler's is.
      mainDone();
    } else {
      untilEvaluated(watch);
    }
  } catch {
    // the program goes on without the mark
  }
}

/**
 * An ES module main: Node.js takes its watch off in the `finally` of the promise chain
 * that evaluates the module, so a promise hook sees it gone as the chain settles; then
 * MAIN_DONE at the next turn of the event loop (a one-shot immediate, as for CommonJS).
 * The hook costs a listener count per promise settled while the module runs.
 * @param {Function} watch
 */
function untilEvaluated(watch) {
  /** @type {any} */
  let ph = null;
  try {
    ph = /** @type {any} */ (require('v8')).promiseHooks;
  } catch {
    // older Node.js
  }
  if (!ph || typeof ph.onSettled !== 'function') {
    pollUntilEvaluated(watch);
    return;
  }
  let count = ReflectApply(listenerCount, process, ['exit']);
  let done = false;
  /** @type {null | (() => void)} */
  let stop = null;
  stop = ph.onSettled(() => {
    if (done) return;
    try {
      const n = ReflectApply(listenerCount, process, ['exit']);
      if (n === count) return;
      count = n;
      if (ReflectApply(rawListeners, process, ['exit']).includes(watch)) return;
      done = true;
      // Stopped from the immediate, not from inside the hooks being run.
      ReflectApply(setImmediateOrig, undefined, [
        () => {
          try {
            if (stop !== null) stop();
          } catch {
            // ignore
          }
          mainDone();
        },
      ]);
    } catch {
      done = true;
    }
  });
}

/**
 * Without promise hooks: look once per turn of the event loop (unref'd immediates, so the
 * program's loop neither stays alive nor stops waiting because of us) until Node.js's
 * watch is gone, then MAIN_DONE (late by up to one wait of the loop).
 * @param {Function} watch
 */
function pollUntilEvaluated(watch) {
  const im = ReflectApply(setImmediateOrig, undefined, [
    () => {
      try {
        if (!on) return;
        if (ReflectApply(rawListeners, process, ['exit']).includes(watch)) pollUntilEvaluated(watch);
        else mainDone();
      } catch {
        // no mark
      }
    },
  ]);
  im.unref();
}

/** Watches for the end of the main module, in the main thread (workers have none). */
function watchMain() {
  try {
    exitListenersBefore = ReflectApply(rawListeners, process, ['exit']);
    // Preloads (this file) run before the main module, and the ticks they queue after it.
    ReflectApply(nextTick, process, [afterMain]);
  } catch {
    // no mark
  }
}

function start() {
  fd = channelFd();
  if (fd < 0) return;
  pid = process.pid;
  tid = pid;
  let wt = null;
  try {
    wt = require('worker_threads');
  } catch {
    // no workers
  }
  const mainThread = wt === null || wt.isMainThread;
  if (!mainThread) {
    // A worker runs on its own thread: its id, from /proc (one readlink per worker).
    const m = /\/task\/(\d+)$/.exec(String(readlinkSync('/proc/thread-self')));
    if (m === null) return;
    tid = Number(m[1]);
  }
  ns = tid;
  const at = begin(HELLO, 12);
  u32(pid);
  u32(ns);
  u8(LANG_JS);
  end(at);
  if (!flush()) return;
  on = true;
  for (const name of SYNC) install(fs, name, (o) => wrapSync(o, name));
  const rp = /** @type {any} */ (fs.realpathSync);
  if (typeof rp === 'function') install(rp, 'native', (o) => wrapSync(o, 'realpathSync.native'));
  for (const name of Object.keys(CALLBACK)) {
    install(fs, name, (o) => wrapCallback(o, name, CALLBACK[name]));
  }
  const rpc = /** @type {any} */ (fs.realpath);
  if (typeof rpc === 'function') install(rpc, 'native', (o) => wrapCallback(o, 'realpath', 'p'));
  /** @type {any} */
  let promises = null;
  try {
    promises = fs.promises;
  } catch {
    // none
  }
  if (promises !== null && typeof promises === 'object') {
    for (const name of Object.keys(PROMISES)) {
      install(promises, name, (o) => wrapPromise(o, name, PROMISES[name]));
    }
  }
  syncESM();
  if (mainThread) watchMain();
}

module.exports = {
  /** Restores every original (for tests, and for hosts that want the agent gone). */
  unhook,
  /** What the agent did so far. */
  stats() {
    return { active: on, messages, dropped: droppedTotal, sites: sites.size, wrapped: installed.length };
  },
};

try {
  start();
} catch {
  // Never into the program: without a working agent it runs as without dejavu.
  unhook();
}
