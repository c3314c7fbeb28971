// @ts-check
/**
 * dejavu's Node.js agent: `dejavu record` loads it into the Node.js programs it starts
 * (NODE_OPTIONS="--require <this file>"). It wraps the functions that make file calls and
 * start processes (fs, fs.promises and FileHandle, fs streams, child_process, the writes
 * of process.stdout and process.stderr that console makes) and tells dejavu, over an
 * inherited pipe, which line of JavaScript makes each call; dejavu turns that into the
 * call stacks of the syscalls it records. Protocol and limits: docs/agents.md.
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
// ASYNC_BEGIN's kinds: what the queued call does on its path, so that dejavu gives a worker
// thread's system call the site of a pending call of its kind (concurrent requests queue an
// fs.stat and an fs.open of one file). ANY: any call (mkdir, rename, realpath ...).
const ASYNC_ANY = 0;
const ASYNC_STAT = 1;
const ASYNC_OPEN = 2;
/** @type {Map<string, number>} */
const ASYNC_KIND = new Map(Object.entries({
  stat: ASYNC_STAT, lstat: ASYNC_STAT, access: ASYNC_STAT, exists: ASYNC_STAT,
  open: ASYNC_OPEN, readFile: ASYNC_OPEN, writeFile: ASYNC_OPEN, appendFile: ASYNC_OPEN,
  readdir: ASYNC_OPEN, opendir: ASYNC_OPEN,
}));
/** @param {string} name an fs function's name */
function asyncKind(name) {
  return ASYNC_KIND.get(name) ?? ASYNC_ANY;
}
const ASYNC_END = 6;
const DROPPED = 7;
const MAIN_DONE = 8;
const FD = 9;
const STICKY = 10;
const LANG_JS = 1;
/** PIPE_BUF: a write up to this size is atomic, so agents' messages never interleave. */
const MAX_WRITE = 4096;
/** The program's own frames per call site, and the frames captured first. */
const FRAMES = 4;
/** The frames captured first by the stdio write wrapper (console's frames come first). */
const STDIO_FRAMES = 8;
/**
 * Frames kept before the program's first frame of its own: Node.js's (the module loader's
 * for a require(): node:internal/modules/...) and the libraries' (node_modules) between
 * the wrapped call and the program's line, innermost first.
 */
const MAX_INNER = 8;
/** Frames per call site in all: those, then up to FRAMES of the program's. */
const MAX_SITE = 36;
/** Frames captured when the first capture holds no frame of the program's own (a call
 * made by a library or by Node.js itself): the program's line further out. */
const DEEP_FRAMES = 40;
/** What a frame is (kindOf). */
const OWN = 0;
const RUNTIME = 1;
const AGENT = 2;
const LIBRARY = 3;
/** Longest function name and file name sent, in bytes (a site must fit one write). */
const MAX_NAME = 200;
const MAX_FILE = 700;
/** Longest path sent with an asynchronous call (longer ones are not attributed). */
const MAX_PATH = 3000;
/**
 * Repeated calls (docs/agents.md, "Repeated calls"): the synchronous fs functions whose
 * syscalls all name their one path argument (or the descriptor they open on it). A call
 * of one of them on a path whose site dejavu already has for this thread (STICKY) sends
 * nothing and captures no stack; its site is checked at each of its next STICKY_EXACT
 * calls, then again after 1, 2, 4, 8, ... calls, then every STICKY_GAP calls, and a change
 * is said at once. After a change (a switch: another line calls the same function on the
 * path) the path is checked at every call until CALM checks in a row found the same site,
 * then less and less often again (1, 2, 4, ...); CALM doubles with each switch the path
 * has seen (8, 16, 32, ...), so lines that take turns often keep it checked at every call.
 * The price: at a switch that comes while the path is checked less often (after its first
 * calls, and after each calm run), up to STICKY_GAP of the new line's first calls (the
 * calls between two checks) are still given to the earlier line.
 */
const STICKY_SYNC = new Set([
  'accessSync', 'appendFileSync', 'chmodSync', 'chownSync', 'existsSync', 'lchownSync',
  'lstatSync', 'lutimesSync', 'openSync', 'opendirSync', 'readdirSync', 'readFileSync',
  'readlinkSync', 'rmdirSync', 'statSync', 'statfsSync', 'truncateSync', 'unlinkSync',
  'utimesSync', 'writeFileSync',
]);
/**
 * Most calls between two checks of a repeated call's site. A check is a V8 stack capture
 * (5-10 µs with the frames read): every 16th call, the checks were two thirds of what the
 * agent cost per call in a statSync loop (1.4 µs of it); every 256th, they cost 0.05 µs
 * (bench/agents.py). Python's agent checks every 16th call: its frame walk is cheap.
 */
const STICKY_GAP = 256;
/**
 * A path's calls after its first that are all checked, whatever they find, before the
 * checks thin out: a loop over paths that checks each one at a line and again at another
 * (exists, then isfile, each once per path) calls each path from each line once or
 * twice, and the second line's calls must be found at once (they were given the first
 * line's site: pip's .pyc compile loop named at the exists() of its unpacking).
 */
const STICKY_EXACT = 3;
/**
 * Checks in a row that must find the same site before a path whose site switched is
 * checked less often again: STICKY_CALM << (switches - 1), the shift at most
 * STICKY_CALM_SHIFT. A helper called from two lines one after the other (a warm-up, then
 * the loop) is checked at every call for 8 calls, not for good (a V8 stack per call was
 * 4x native for a statSync loop); lines taking turns in blocks of m calls stop decaying
 * once CALM exceeds m - 1, after at most 1 + log2(m / 8) decays.
 */
const STICKY_CALM = 8;
const STICKY_CALM_SHIFT = 16;
/** Most paths remembered (past it the memory starts again: the next call of each checks). */
const MAX_STICKY = 4096;

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
/** Whether this agent is the main thread's (a worker's stdio is a message to it). */
let mainThread = false;
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
/**
 * Path argument (as the program gave it) -> the site dejavu was last told for it (STICKY),
 * the wrapper that made that call, the working directory then, the calls since, the count
 * at which the site is checked again, the calls between checks, whether a switch of its
 * site is recent (then every call checks), the switches seen (of the same function's
 * site), and while volatile the checks in a row that found the same site.
 * @type {Map<string, { site: number, fn: Function, cwd: string, n: number, next: number, gap: number, volatile: boolean, switches: number, calm: number }>}
 */
const sticky = new Map();
/** promise -> request number, for fs.promises calls in flight */
/** @type {Map<object, number>} */
const inFlight = new Map();
/** @type {null | (() => void)} */
let stopPromiseHook = null;
/** Whether the last site siteOf picked holds a frame of the program's own. */
let siteOwn = false;
/** The site of the last asynchronous call reported. */
let lastSite = 0;
/** > 0: the site the wrapped call about to run reports, instead of capturing one (a
 * stream's own fs calls, made from Node.js's stream code on the stream's behalf). */
let forced = 0;
/** Promises that settled while a promise wrapper ran its original (before it knew them). */
/** @type {Set<object> | null} */
let settledEarly = null;
/** [object, key, original, wrapper] of everything installed, for unhook. */
/** @type {Array<[any, string | symbol, Function, Function]>} */
const installed = [];
/** What else unhook puts back (accessors, own properties of objects made later). */
/** @type {Array<() => void>} */
const restorers = [];

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

/** The program's package directory when its main script is inside node_modules (npx
 * tsc: .../node_modules/typescript/): its files are the program's own. */
/** @type {string | null} */
let ownRoot = null;
let ownRootKnown = false;

/** @param {string} main */
function packageDirOf(main) {
  const nm = '/node_modules/';
  const i = main.lastIndexOf(nm);
  if (i < 0) return null;
  const rest = main.slice(i + nm.length).split('/');
  const n = rest[0].startsWith('@') ? 2 : 1;
  if (rest.length <= n) return null;
  return main.slice(0, i + nm.length) + rest.slice(0, n).join('/') + '/';
}

/** What process.argv[1] says of ownRoot (undefined: not read yet). */
/** @type {string | null | undefined} */
let argvRoot;

/**
 * ownRoot, from the main module once it is loaded (its real path: `node_modules/.bin/tsc`
 * is `node_modules/typescript/bin/tsc`), else from process.argv[1] as given. The main
 * module is process.mainModule: `require.main` stays undefined in a module preloaded with
 * --require, as this agent is (it is set when a module's require is made).
 */
function ownRootNow() {
  if (ownRootKnown) return ownRoot;
  try {
    const m = process.mainModule;
    if (m && typeof m.filename === 'string') {
      ownRoot = packageDirOf(m.filename);
      ownRootKnown = true;
      // What was read before (with argv[1]'s answer) may name a frame's kind otherwise.
      kinds.clear();
      frameInfo.clear();
      return ownRoot;
    }
    if (argvRoot === undefined) {
      const a = process.argv[1];
      argvRoot = typeof a === 'string' ? packageDirOf(a) : null;
    }
    return argvRoot;
  } catch {
    return null;
  }
}

/** kindOf's answers by file name (a frame's file name is one of a few hundred strings). */
/** @type {Map<string, number>} */
const kinds = new Map();
/** Most file names kindOf remembers (past it the memory starts again). */
const MAX_KINDS = 8192;

/**
 * What a frame is: this agent's, Node.js's own (node: and internal/ modules, builtins
 * without a file), a library's (under node_modules, but for the program's own package when
 * its main script is in one), or the program's.
 * @param {string | null | undefined} file
 */
function kindOf(file) {
  if (typeof file !== 'string') return RUNTIME;
  let k = kinds.get(file);
  if (k === undefined) {
    k = kindOfFile(file);
    if (kinds.size >= MAX_KINDS) kinds.clear();
    kinds.set(file, k);
  }
  return k;
}

/** @param {string} file */
function kindOfFile(file) {
  if (file === SELF) return AGENT;
  if (file.startsWith('node:') || file.startsWith('internal/')) return RUNTIME;
  if (file.includes('/node_modules/')) {
    const root = ownRootNow();
    if (root !== null) {
      const f = file.startsWith('file://') ? fileOf(file) : file;
      if (f.startsWith(root) && !f.includes('/node_modules/', root.length - 1)) return OWN;
    }
    return LIBRARY;
  }
  return OWN;
}

/**
 * The site number of the program's call into the wrapper `fn`, defined to dejavu on
 * first use: Node.js's and the libraries' frames up to the program's first (they say what
 * made the call for the program: the module loader for a require(), a library), then the
 * program's innermost frames (at most FRAMES), MAX_SITE in all; without a frame of the
 * program's, the others alone. 0 when there is no frame at all. Sets siteOwn.
 * @param {Function} fn
 * @param {number} first frames captured first (more when none of them is the program's)
 * @returns {number}
 */
function siteOf(fn, first) {
  siteOwn = false;
  let cs;
  if (deepRun < DEEP_RUN) {
    cs = callSites(fn, first);
    if (cs === null) return 0;
    if (!readFrames(cs) && cs.length === first) {
      // A call made by a library or by Node.js itself (the module loader's, on behalf of
      // a require()): their frames, and the program's line further out.
      cs = callSites(fn, DEEP_FRAMES);
      if (cs === null) return 0;
      readFrames(cs);
      deepRun++;
    } else {
      deepRun = 0;
    }
  } else {
    // The last calls all looked deeper: this one is captured deep at once, and cut to the
    // frames a first capture would have had when those hold one of the program's (the
    // same site either way).
    cs = callSites(fn, DEEP_FRAMES);
    if (cs === null) return 0;
    readFrames(cs);
    let own = false;
    for (let i = 0; i < first && i < cs.length; i++) if (frameKinds[i] === OWN) own = true;
    if (own || cs.length < first) {
      if (cs.length > first) cs.length = first;
      deepRun = 0;
    }
  }
  return siteOfFrames(cs);
}

/**
 * The site of capture `cs`, whose frames readFrames has read (see siteOf). Sets siteOwn
 * and pickedUpTo.
 * @param {NodeJS.CallSite[]} cs
 * @returns {number}
 */
function siteOfFrames(cs) {
  const picked = pick(cs);
  if (picked.length === 0) return 0;
  // The key: each frame's file and its place in the file's source (getPosition, where V8
  // has it: one number, read without the line table; line and column are read for a new
  // site only, by define).
  let key = '';
  pickedKeys.length = picked.length;
  for (let i = 0; i < picked.length; i++) {
    const c = picked[i];
    const f = pickedFiles[i];
    const k = (typeof f === 'string' ? f : '?' + functionOf(c)) + ':' + positionOf(c);
    pickedKeys[i] = k;
    key += k + '\n';
  }
  const id = sites.get(key);
  if (id !== undefined) return id;
  return define(key, picked);
}

/** Each of pick's frames as a key: its file (or function) and its place there. */
/** @type {string[]} */
const pickedKeys = [];

/**
 * Calls in a row whose first capture held no frame of the program's (and so were captured
 * again, deep). From DEEP_RUN on, calls are captured deep at once (a deep capture costs
 * about as much as the two), until one finds the program's frame among its first.
 */
let deepRun = 0;
const DEEP_RUN = 2;

/** The file names and kinds of the last capture's frames (readFrames), reused. */
/** @type {Array<string | null | undefined>} */
const frameFiles = [];
/** @type {number[]} */
const frameKinds = [];
/** How many of the capture's frames the last pick looked at (the site depends on those
 * alone: on the places of the frames it picked, on the files of the others), and which
 * it picked (their indexes, ascending). */
let pickedUpTo = 0;
/** @type {number[]} */
const pickedAt = [];
/** The files of pick's frames, in its order. */
/** @type {Array<string | null | undefined>} */
const pickedFiles = [];

/**
 * Reads the file name and kind of each of `cs`'s frames into frameFiles and frameKinds
 * (each once: a CallSite's getFileName is a call into V8); whether one is the program's.
 * @param {NodeJS.CallSite[]} cs
 */
function readFrames(cs) {
  let own = false;
  for (let i = 0; i < cs.length; i++) {
    const f = cs[i].getFileName();
    const k = kindOf(f);
    frameFiles[i] = f;
    frameKinds[i] = k;
    if (k === OWN) own = true;
  }
  return own;
}

/** Whether CallSites have getPosition (V8's; checked on the first, they share it). */
let hasPosition = -1;

/** @param {NodeJS.CallSite} c */
function positionOf(c) {
  const any = /** @type {any} */ (c);
  if (hasPosition < 0) hasPosition = typeof any.getPosition === 'function' ? 1 : 0;
  return hasPosition === 1 ? any.getPosition() : c.getLineNumber() + ':' + c.getColumnNumber();
}

/**
 * The frames of a site, innermost first: Node.js's and the libraries' up to the
 * program's first (at most MAX_INNER, the innermost), then at most FRAMES of the
 * program's (the others between them skipped); never this agent's. Sets siteOwn and
 * pickedFiles. Reads the kinds readFrames found for `cs`.
 * @param {NodeJS.CallSite[]} cs
 * @returns {NodeJS.CallSite[]}
 */
function pick(cs) {
  /** @type {NodeJS.CallSite[]} */
  const inner = [];
  /** @type {NodeJS.CallSite[]} */
  const own = [];
  const innerFiles = [];
  const ownFiles = [];
  let i = 0;
  pickedAt.length = 0;
  for (; i < cs.length && own.length < FRAMES; i++) {
    const k = frameKinds[i];
    if (k === OWN) {
      own.push(cs[i]);
      ownFiles.push(frameFiles[i]);
      pickedAt.push(i);
    } else if (k !== AGENT && own.length === 0 && inner.length < MAX_INNER) {
      inner.push(cs[i]);
      innerFiles.push(frameFiles[i]);
      pickedAt.push(i);
    }
  }
  siteOwn = own.length > 0;
  pickedUpTo = i;
  pickedFiles.length = 0;
  for (const f of innerFiles) pickedFiles.push(f);
  for (const f of ownFiles) pickedFiles.push(f);
  if (inner.length === 0) return own;
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

/** A frame as a SITE holds it: function, file, line, column, and whether it is the
 * program's. @typedef {[Buffer, Buffer, number, number, boolean]} Frame */

/**
 * The frames of the sites defined so far, by their key (file and place, pickedKeys): a
 * site of a call deep inside a library shares most of its frames with others, and reading
 * a frame's names from V8 is most of what a new site costs. Its function is named as
 * when first met (the receiver's type a method is called on can differ between calls; the
 * site's key, file and place, does not say it either).
 * @type {Map<string, Frame>}
 */
const frameInfo = new Map();
/** Most frames remembered (past it the memory starts again). */
const MAX_FRAME_INFO = 16384;

/**
 * @param {NodeJS.CallSite} c
 * @param {string} k its key
 * @returns {Frame}
 */
function frameOf(c, k) {
  let fr = frameInfo.get(k);
  if (fr === undefined) {
    const f = c.getFileName();
    const fn = utf8(functionOf(c), MAX_NAME);
    let line = c.getLineNumber() || 0;
    let col = c.getColumnNumber() || 0;
    let file = typeof f === 'string' ? fileOf(f) : null;
    const o = typeof f === 'string' ? original(f, line, col) : null;
    if (o !== null) [file, line, col] = o;
    const name = file !== null ? utf8(file, MAX_FILE) : Buffer.alloc(0);
    fr = [fn, name, line, col, kindOf(f) === OWN];
    if (frameInfo.size >= MAX_FRAME_INFO) frameInfo.clear();
    frameInfo.set(k, fr);
  }
  return fr;
}

/**
 * The source maps Node.js holds, by generated file (null: none).
 * @type {Map<string, import('module').SourceMap | null>}
 */
const sourceMaps = new Map();
/** Node.js's module.findSourceMap (null where there is none). */
/** @type {((path: string) => import('module').SourceMap | undefined) | null | undefined} */
let findSourceMap;

/**
 * Where generated place `line`:`col` (1-based) of file `f` is in its source, by the source
 * map Node.js keeps for the file: [file, line, column], or null. Node.js keeps them when
 * its source maps are on (--enable-source-maps, or process.setSourceMapsEnabled(true), as
 * tsx does before loading a program), read as each module is compiled: nothing is read
 * here (a read of the program's files would be in its trace). A compiled TypeScript
 * module's code is one generated line (esbuild's): without its map every call in it is
 * named at line 2.
 * @param {string} f
 * @param {number} line
 * @param {number} col
 * @returns {[string, number, number] | null}
 */
function original(f, line, col) {
  if (line === 0) return null;
  if (findSourceMap === undefined) {
    try {
      findSourceMap = require('module').findSourceMap || null;
    } catch {
      findSourceMap = null;
    }
  }
  if (!findSourceMap) return null;
  let map = sourceMaps.get(f);
  if (map === undefined) {
    try {
      map = findSourceMap(f) || null;
    } catch {
      map = null;
    }
    if (sourceMaps.size >= 1024) sourceMaps.clear();
    sourceMaps.set(f, map);
  }
  if (map === null) return null;
  /** @type {any} */
  let e;
  try {
    e = map.findEntry(line - 1, Math.max(col - 1, 0));
  } catch {
    return null;
  }
  if (!e || typeof e.originalSource !== 'string' || typeof e.originalLine !== 'number') {
    return null;
  }
  const src = e.originalSource;
  // Sources Node.js resolved to files (not webpack:// names, which name no file).
  if (!src.startsWith('file://') && !src.startsWith('/')) return null;
  return [fileOf(src), e.originalLine + 1, (e.originalColumn || 0) + 1];
}

/**
 * Gives `key` a number and queues its definition (sent with the message that uses it).
 * @param {string} key
 * @param {NodeJS.CallSite[]} picked its frames (see pick)
 */
function define(key, picked) {
  const id = ++siteSeq;
  /** @type {Frame[]} */
  const frames = [];
  let size = 3 + 14;
  for (let i = 0; i < picked.length; i++) {
    const fr = frameOf(picked[i], pickedKeys[i]);
    frames.push(fr);
    size += 12 + fr[0].length + fr[1].length;
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
 * What an asynchronous call will name in its syscalls, from its arguments: the paths
 * (resolved), and the descriptor when it takes one.
 * @param {string} spec 'p' path, 'pp' two paths, 'p1' the second argument,
 *   'f' a descriptor, 'pf' a path or a descriptor, '' none
 * @param {IArguments | unknown[]} args
 * @returns {{ paths: Buffer[], fd: number }}
 */
function targetsOf(spec, args) {
  /** @type {Buffer[]} */
  const paths = [];
  let fdv = -1;
  if (spec === '') return { paths, fd: fdv };
  const a0 = args[0];
  if ((spec === 'f' || spec === 'pf') && typeof a0 === 'number') {
    if (Number.isInteger(a0) && a0 >= 0 && a0 <= 0x7fffffff) fdv = a0;
    return { paths, fd: fdv };
  }
  if (spec === 'f' || typeof a0 === 'number') return { paths, fd: fdv };
  const cwd = process.cwd();
  /** @param {unknown} a */
  const add = (a) => {
    const b = resolvePath(a, cwd);
    if (b !== null) paths.push(b);
  };
  if (spec === 'p' || spec === 'pf') {
    add(a0);
  } else if (spec === 'pp') {
    add(a0);
    add(args[1]);
  } else if (spec === 'p1') {
    add(args[1]);
  }
  return { paths, fd: fdv };
}

// ---------------------------------------------------------------------------------------
// Error stacks: a wrapper sits between the program and fs, so an error thrown through it
// carries one more frame (this file's) in its stack. The wrapper does not catch it (a
// rethrow would move the throw site Node.js prints above an uncaught error to this file);
// it raises Error.stackTraceLimit by one while the original runs (two for a wrapper inside
// a method, `shaped`), so the program's own frames are all still there.

/**
 * Raises Error.stackTraceLimit by `n` (our frames); returns what to restore, or null.
 * @param {number} [n]
 */
function raiseLimit(n = 1) {
  try {
    const lim = Error.stackTraceLimit;
    if (typeof lim !== 'number' || !hasOwn.call(Error, 'stackTraceLimit')) return null;
    Error.stackTraceLimit = lim + n;
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
 * What the program gets for original `o` and its wrapper `w`: `w`, made to look like `o`;
 * or, where `o` has no prototype (an arrow function or a method: realpathSync.native and
 * realpath.native are arrows), a method that calls `w` (no prototype, no constructor,
 * as `o`), made to look like `o`. `install` keeps a wrapper only when it is shaped as its
 * original: a plain function around an arrow was refused, and left the arrow unwrapped.
 * The wrapper cuts its stacks at what this returns (the program's frame is the next).
 * @param {Function} o
 * @param {Function} w
 * @returns {Function}
 */
function shaped(o, w) {
  let top = w;
  if (!hasOwn.call(o, 'prototype')) {
    const name = typeof o.name === 'string' ? o.name : '';
    top = {
      /** @this {unknown} */
      [name]() {
        return ReflectApply(w, this, arguments);
      },
    }[name];
  }
  lookAlike(o, top);
  return top;
}

/** The next request number (never 0). */
function nextReq() {
  reqSeq = (reqSeq + 1) >>> 0 || 1;
  return reqSeq;
}

/**
 * ENTER for `site`; false when it could not be sent.
 * @param {number} site
 * @param {number} d the depth before it
 */
function enter(site, d) {
  try {
    const at = begin(ENTER, 21);
    u32(pid);
    u32(tid);
    u32(ns);
    u32(site);
    u16(d);
    end(at);
    return flush();
  } catch {
    discard();
    return false;
  }
}

/** @param {number} d the depth after it */
function exit(d) {
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

/**
 * FD: calls on descriptor `fdv` are `site`'s until ASYNC_END of `req` (or its close).
 * Queued in the current write (the caller flushes).
 * @param {number} site
 * @param {number} req
 * @param {number} fdv
 */
function fdMessage(site, req, fdv) {
  const at = begin(FD, 27);
  u32(pid);
  u32(tid);
  u32(ns);
  u32(site);
  u32(req);
  u32(fdv);
  end(at);
}

/**
 * A repeated call (STICKY_SYNC) of wrapper `w` on path argument `p`: whether dejavu has, or
 * was just told, its site for this thread and path, so that the call needs no ENTER and
 * EXIT. Between checks it costs a map lookup; a check captures the stack as any call does,
 * and a site that changed (another line calling with the same path) is said at once.
 * @param {Function} w
 * @param {string} p
 * @param {number} first
 * @returns {boolean}
 */
function stickyCall(w, p, first) {
  // The working directory matters to a relative path only: an absolute one's entry keeps
  // '' (as the Python agent's). process.cwd() is a property lookup on `process` and a call
  // per call otherwise, ~20 ns of a loop's ~80 (bench/RESULTS.md, thirteenth session).
  const cwd = p.charCodeAt(0) === 47 /* '/' */ ? '' : process.cwd();
  const e = sticky.get(p);
  if (e !== undefined && e.fn === w && e.cwd === cwd && e.n < e.next) {
    e.n++;
    return true;
  }
  const site = siteOf(w, first);
  if (site === 0) return false;
  if (e !== undefined && e.site === site && e.cwd === cwd) {
    e.fn = w;
    e.n++;
    // A path called from one line only: checked less and less often. One whose site
    // switched (another line called the same function on it): checked at every call until
    // enough checks in a row found the same site, then less and less often again, from
    // the next call but one; the calm needed doubles with each switch.
    if (!e.volatile) {
      if (e.gap < -1) {
        // Among the path's first calls (STICKY_EXACT): the next one is checked too.
        e.gap++;
        e.next = e.n;
      } else {
        e.gap = e.gap < 0 ? 1 : Math.min(e.gap * 2, STICKY_GAP);
        e.next = e.n + e.gap;
      }
    } else if (++e.calm >= STICKY_CALM << Math.min(e.switches - 1, STICKY_CALM_SHIFT)) {
      e.volatile = false;
      e.calm = 0;
      e.gap = 1;
      e.next = e.n + 1;
    }
    return true;
  }
  const path = resolvePath(p, cwd);
  if (path === null) return false;
  const at = begin(STICKY, 19 + path.length);
  u32(pid);
  u32(tid);
  u32(ns);
  u32(site);
  bytes(path);
  end(at);
  if (!flush()) {
    sticky.delete(p);
    return false;
  }
  if (sticky.size >= MAX_STICKY) sticky.clear();
  if (e !== undefined && e.cwd === cwd && e.fn === w) {
    // The site of the same function on the same path changed (another line calls it),
    // a switch: this path's site is checked at every call until a calm run (above), which
    // must be longer with each switch. Another function on the path (the module loader's
    // readFileSync of a script that then stats itself) is not that: its calls are checked
    // less and less often again (below).
    e.site = site;
    e.fn = w;
    e.volatile = true;
    e.switches++;
    e.calm = 0;
    e.n = e.next = 0;
  } else if (e !== undefined && e.cwd === cwd) {
    // Another function: its next STICKY_EXACT calls check (the one before may be called
    // again from another line; a file opened at one line, then stat'ed at two), then less
    // and less often; a path whose site switched stays checked at every call, whatever
    // function, until its calm run (the counts are kept: a change of function is found at
    // once, it is no switch of lines).
    e.site = site;
    e.fn = w;
    e.n = e.next = 0;
    if (!e.volatile) e.gap = -STICKY_EXACT;
  } else {
    sticky.set(p, { site, fn: w, cwd, n: 1, next: 1, gap: -STICKY_EXACT, volatile: false, switches: 0, calm: 0 });
  }
  return true;
}

/**
 * A synchronous API: ENTER before the original, EXIT after it, whatever happens.
 * @param {Function} o
 * @param {number} [first] frames captured first (see siteOf)
 * @param {boolean} [repeats] its calls name their one path argument (STICKY_SYNC)
 * @param {boolean} [stdioWrite] a write on a descriptor (writeSync, writevSync): on
 *   descriptor 1 or 2, in the main thread, outside any other wrapped call, its site is
 *   said as process.stdout's and process.stderr's writes say theirs (stdioSaid, one
 *   state per descriptor for both): pino's synchronous destination, a program's own
 *   fs.writeSync(1, ...) per line
 */
function wrapSync(o, first = FRAMES, repeats = false, stdioWrite = false) {
  /** What the program calls (shaped): the frames above it are the agent's. */
  let top = /** @type {Function} */ (o);
  let ours = 1;
  /** @this {unknown} */
  const w = function () {
    if (new.target !== undefined) return ReflectConstruct(o, arguments, new.target);
    if (!on) return ReflectApply(o, this, arguments);
    // Called by the wrapped APIs themselves (readFileSync calls fs.openSync, exec calls
    // execFile): the outer call reports.
    let site = 0;
    const d = depth;
    if (busy === 0) {
      try {
        const p = arguments[0];
        if (repeats && forced === 0 && d === 0 && typeof p === 'string' && stickyCall(top, p, first)) {
          site = 0; // said by STICKY: no ENTER, no EXIT
        } else if (stdioWrite && mainThread && forced === 0 && d === 0 && (p === 1 || p === 2)) {
          sayStdio(top, p); // the descriptor's own site: no ENTER, no EXIT
        } else {
          site = forced !== 0 ? forced : siteOf(top, first);
          if (site !== 0 && !enter(site, d)) site = 0;
        }
      } catch {
        discard();
        site = 0;
      }
    }
    if (site !== 0) depth = d + 1;
    busy++;
    const lim = raiseLimit(ours);
    try {
      return ReflectApply(o, this, arguments);
    } finally {
      restoreLimit(lim);
      busy--;
      if (site !== 0) {
        depth = d;
        exit(d);
      }
    }
  };
  top = shaped(o, w);
  if (top !== w) ours = 2;
  return top;
}

/**
 * Reports an asynchronous call: ASYNC_BEGIN per path it names, or FD for the descriptor
 * it takes. Returns its request number, or 0.
 * @param {Function} w the wrapper (frames above it are not the program's)
 * @param {string} spec
 * @param {IArguments | unknown[]} args
 * @param {number} kind what it does on its paths (ASYNC_ANY, ASYNC_STAT, ASYNC_OPEN)
 */
function asyncBegin(w, spec, args, kind) {
  try {
    const { paths, fd: fdv } = targetsOf(spec, args);
    if (paths.length === 0 && fdv < 0) return 0;
    const site = forced !== 0 ? forced : siteOf(w, FRAMES);
    if (site === 0) return 0;
    lastSite = site;
    const req = nextReq();
    if (fdv >= 0) fdMessage(site, req, fdv);
    for (const p of paths) {
      const at = begin(ASYNC_BEGIN, 26 + p.length);
      u32(pid);
      u32(tid);
      u32(ns);
      u32(site);
      u32(req);
      u8(kind);
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
  if (opens.size > 0) opens.delete(req);
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
 * A callback API: ASYNC_BEGIN (or FD) when called, ASYNC_END when fs calls back (just
 * before the program's callback runs, with the same `this` and arguments).
 * @param {Function} o
 * @param {string} spec
 * @param {number} kind ASYNC_BEGIN's kind (asyncKind)
 */
function wrapCallback(o, spec, kind) {
  /** What the program calls (shaped). */
  let top = /** @type {Function} */ (o);
  let ours = 1;
  /** @this {unknown} */
  const w = function () {
    if (new.target !== undefined) return ReflectConstruct(o, arguments, new.target);
    if (!on) return ReflectApply(o, this, arguments);
    const n = arguments.length;
    const req = busy === 0 && n > 0 && typeof arguments[n - 1] === 'function' ? asyncBegin(top, spec, arguments, kind) : 0;
    if (req === 0) {
      // Nothing to report: the original, with the wrapper's frame accounted for.
      busy++;
      const lim = raiseLimit(ours);
      try {
        return ReflectApply(o, this, arguments);
      } finally {
        restoreLimit(lim);
        busy--;
      }
    }
    const cb = arguments[n - 1];
    const args = new Array(n);
    for (let i = 0; i < n; i++) args[i] = arguments[i];
    /** @this {unknown} */
    args[n - 1] = function () {
      asyncEnd(req);
      return ReflectApply(cb, this, arguments);
    };
    busy++;
    const lim = raiseLimit(ours);
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
  top = shaped(o, w);
  if (top !== w) ours = 2;
  return top;
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
      // A FileHandle made since the last promise settled is the one this settles with.
      const handle = handleSeq === settleSeq ? lastHandle : null;
      settleSeq++;
      if (inFlight.size === 0) return;
      const req = inFlight.get(p);
      if (req === undefined) return;
      inFlight.delete(p);
      if (handle !== null && opens.has(req)) handleOpened(req, handle);
      asyncEnd(req);
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * A promise API: `report(w, this, arguments)` when called (ASYNC_BEGIN or FD; it returns
 * the request number, or 0), ASYNC_END when its promise settles.
 * @param {Function} o
 * @param {string} name
 * @param {(w: Function, self: any, args: IArguments) => number} report
 */
function wrapPromise(o, name, report) {
  // A method, like the async function it stands for: no prototype, not a constructor.
  // (Its body is inline: a helper would be one more frame in the program's stacks.)
  const w = {
    /** @this {unknown} */
    [name]() {
      if (!on) return ReflectApply(o, this, arguments);
      const req = busy === 0 && promiseHook() ? report(w, this, arguments) : 0;
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
 * A FileHandle method: FD for the handle's descriptor (its reads and writes run on the
 * threadpool), reported only when the program's own code calls it (fs.promises.readFile
 * closes its handle itself: its own report covers that).
 * @param {Function} w
 * @param {any} self
 * @returns {number}
 */
function handleBegin(w, self) {
  try {
    const fdv = self !== null && typeof self === 'object' ? self.fd : undefined;
    if (typeof fdv !== 'number' || !Number.isInteger(fdv) || fdv < 0) return 0;
    const site = siteOf(w, FRAMES);
    if (site === 0 || !siteOwn) return 0;
    const req = nextReq();
    fdMessage(site, req, fdv);
    return flush() ? req : 0;
  } catch {
    discard();
    return 0;
  }
}

/**
 * Replaces obj[key] with make(original), when it is a function in a plain writable
 * property or behind an accessor with a setter that keeps it (anything else is left
 * alone).
 * @param {any} obj
 * @param {string | symbol} key
 * @param {(o: Function) => Function} make
 * @returns {Function | null} the wrapper
 */
function install(obj, key, make) {
  try {
    const d = Object.getOwnPropertyDescriptor(obj, key);
    if (d === undefined) return null;
    let o;
    if ('value' in d) {
      if (!d.writable) return null;
      o = d.value;
    } else {
      // A lazy accessor (Node.js 20's fs.opendir and fs.opendirSync): its getter gives
      // the function (and makes a data property of it, as the program's first use would),
      // its setter takes a replacement.
      if (typeof d.get !== 'function' || typeof d.set !== 'function') return null;
      o = obj[key];
    }
    if (typeof o !== 'function') return null;
    const w = make(o);
    // A wrapper must look like its original down to having a prototype or not.
    if (hasOwn.call(o, 'prototype') !== hasOwn.call(w, 'prototype')) return null;
    obj[key] = w;
    if (obj[key] !== w) return null; // a setter that kept something else
    installed.push([obj, key, o, w]);
    return w;
  } catch {
    return null;
  }
}

/**
 * Defines own property `key` of `obj` (an object made after start: a stream) as `value`,
 * non-enumerable. `restore`: take it off again at unhook (for the few long-lived ones:
 * the stdio streams; a file stream's wrappers only pass through once the agent is off,
 * and keeping them for unhook would keep every stream alive).
 * @param {any} obj
 * @param {string | symbol} key
 * @param {unknown} value
 * @param {boolean} restore
 */
function defineOwn(obj, key, value, restore) {
  Object.defineProperty(obj, key, { value, writable: true, configurable: true, enumerable: false });
  if (restore) {
    restorers.push(() => {
      if (obj[key] === value) delete obj[key];
    });
  }
}

// ---------------------------------------------------------------------------------------
// child_process: the fork happens inside the call (spawn and the synchronous ones on the
// calling thread; exec, execFile and fork through spawn), so an ENTER..EXIT around it
// makes the child, until its exec, and its exec, the line's (docs/agents.md, "Spawns").

const CHILD_PROCESS = ['spawn', 'exec', 'execFile', 'fork', 'spawnSync', 'execSync', 'execFileSync'];
const PROMISIFY_CUSTOM = Symbol.for('nodejs.util.promisify.custom');

function wrapChildProcess() {
  /** @type {any} */
  let cp = null;
  try {
    cp = require('child_process');
  } catch {
    return;
  }
  for (const name of CHILD_PROCESS) {
    const w = install(cp, name, (o) => wrapSync(o));
    if (w === null) continue;
    // util.promisify(exec): its custom version calls the original exec; wrap it too.
    try {
      const d = Object.getOwnPropertyDescriptor(w, PROMISIFY_CUSTOM);
      if (d !== undefined && typeof d.value === 'function') {
        Object.defineProperty(w, PROMISIFY_CUSTOM, { ...d, value: wrapSync(d.value) });
      }
    } catch {
      // keep the shared one
    }
  }
}

// ---------------------------------------------------------------------------------------
// What the system is made of, asked synchronously: os.cpus() reads /proc/cpuinfo and
// /proc/stat, os.totalmem() and freemem() /proc/meminfo, process.memoryUsage()
// /proc/self/stat, constrainedMemory() the cgroup's limits, and process.report.getReport()
// all of them (detect-libc asks it for the glibc version; rollup and esbuild's loaders ask
// detect-libc). Each a call of its own line (ENTER..EXIT): vite's first finding, 34 such
// reads on the main thread, had no line.

const OS_INFO = [
  'cpus', 'totalmem', 'freemem', 'loadavg', 'uptime', 'userInfo', 'homedir',
  'networkInterfaces', 'availableParallelism',
];
const PROCESS_INFO = ['memoryUsage', 'constrainedMemory', 'availableMemory'];

function wrapSystemInfo() {
  /** @type {any} */
  let os = null;
  try {
    os = require('os');
  } catch {
    // none
  }
  if (os !== null) for (const name of OS_INFO) install(os, name, (o) => wrapSync(o));
  for (const name of PROCESS_INFO) {
    const w = install(process, name, (o) => wrapSync(o));
    // memoryUsage.rss() reads /proc/self/stat too (lookAlike shared the original's).
    if (w !== null && typeof (/** @type {any} */ (w).rss) === 'function') install(w, 'rss', (o) => wrapSync(o));
  }
  try {
    const report = /** @type {any} */ (process).report;
    if (report !== null && typeof report === 'object') install(report, 'getReport', (o) => wrapSync(o));
  } catch {
    // no report (a build without it)
  }
}

// ---------------------------------------------------------------------------------------
// process.stdout and process.stderr (console.log, console.warn, ... write through them):
// their write makes the write(2) on the calling thread (files: a synchronous fs write;
// terminals and pipes: libuv writes at once what the descriptor takes; what a full pipe
// leaves queued is written later by the event loop). Each write says its caller's site as
// the descriptor's own (an FD message without a request: the site of every later call on
// the descriptor that no wrapped call names), once: the next writes from the same frames
// say nothing, another line says itself in its place. A log line per request costs a
// stack capture and a comparison of its frames, not an ENTER and an EXIT (two writes to
// the channel per line: 29% of the agent's profile of a console.error loop, and the key
// built from every frame another 9%; bench/RESULTS.md, twenty-first session). The main
// thread's fs.writeSync and fs.writevSync on descriptor 1 or 2 say theirs the same way,
// with the same state (wrapSync's `stdioWrite`).

/**
 * A stdio descriptor's state: the site last said for it (0: none), and the frames that
 * site was found from: the first `len` frames of the capture, by file (or '?' and
 * function, for a frame without one), and the places of those the site holds (null for
 * the others: their file says their kind, all the site depends on; V8's getPosition is
 * the dear half of a comparison). `exact`: the capture ended before the site's frames did
 * (the stack ran out, or the capture's limit came first), so a capture of another length
 * is another site. `deep`: the last capture had to look 40 deep (a library's write: no
 * frame of the program's in the first STDIO_FRAMES), so the next is captured so at once.
 * @typedef {{said: number, files: string[], places: Array<number | string | null>,
 *   len: number, exact: boolean, deep: boolean}} Stdio
 */

/** @returns {Stdio} */
function stdioState() {
  return { said: 0, files: [], places: [], len: 0, exact: false, deep: false };
}
/**
 * The states by the descriptor the write(2)s go to: 1 or 2, or, for a terminal, the one
 * libuv opened again for the stream (non-blocking: `process.stdout._handle.fd`, 18 or
 * 20 where descriptor 1 is /dev/pts/0), whose writes the FD must name.
 * @type {Map<number, Stdio>}
 */
const stdio = new Map();

/** A frame's file for a chain: its file name, or '?' and its function for one without.
 * @param {NodeJS.CallSite} c */
function chainFile(c) {
  const f = c.getFileName();
  return typeof f === 'string' ? f : '?' + functionOf(c);
}

/** Whether capture `cs` begins with the frames `st`'s site was found from.
 * @param {NodeJS.CallSite[]} cs @param {Stdio} st */
function sameChain(cs, st) {
  const n = st.len;
  if (st.exact ? cs.length !== n : cs.length < n) return false;
  for (let i = 0; i < n; i++) if (chainFile(cs[i]) !== st.files[i]) return false;
  for (let i = 0; i < n; i++) {
    const p = st.places[i];
    if (p !== null && positionOf(cs[i]) !== p) return false;
  }
  return true;
}

/**
 * A write of stdio stream `w` (descriptor `fdv`, state `st`) is about to be made outside
 * any wrapped call: says its caller's site for the descriptor unless it was the last one
 * said. The capture is a stack capture as any call's (STDIO_FRAMES, console's frames
 * first; 40 deep for a library's write, as siteOf).
 * @param {Function} w
 * @param {number} fdv
 * @param {Stdio} st
 */
function stdioSaid(w, fdv, st) {
  let cs = callSites(w, st.deep ? DEEP_FRAMES : STDIO_FRAMES);
  if (cs === null) return;
  if (st.said !== 0 && sameChain(cs, st)) return;
  const own = readFrames(cs);
  if (!st.deep) {
    if (!own && cs.length === STDIO_FRAMES) {
      cs = callSites(w, DEEP_FRAMES);
      if (cs === null) return;
      readFrames(cs);
      st.deep = true;
    }
  } else {
    let near = cs.length < STDIO_FRAMES;
    for (let i = 0; i < STDIO_FRAMES && i < cs.length; i++) if (frameKinds[i] === OWN) near = true;
    if (near) {
      // The program's own write again: its first frames are the site.
      if (cs.length > STDIO_FRAMES) cs.length = STDIO_FRAMES;
      st.deep = false;
    }
  }
  const site = siteOfFrames(cs);
  if (site === 0) {
    // No frame to name (none of the program's, Node.js's or a library's): said again
    // at the next write; the descriptor keeps the site said last.
    st.said = 0;
    st.len = 0;
    return;
  }
  // The frames pick looked at: a capture that begins with them has the same site.
  const n = pickedUpTo;
  st.len = n;
  st.exact = n === cs.length;
  st.files.length = n;
  st.places.length = n;
  for (let i = 0; i < n; i++) {
    st.files[i] = chainFile(cs[i]);
    st.places[i] = null;
  }
  for (const i of pickedAt) st.places[i] = positionOf(cs[i]);
  if (site === st.said) return;
  fdMessage(site, 0, fdv);
  // Lost (a full channel): said again at the next write.
  st.said = flush() ? site : 0;
}

/**
 * stdioSaid for a write on descriptor `fdv` (1 or 2, or a terminal's own: see `stdio`)
 * under wrapper `w`; a failure of the agent's own forgets what was said, so that the next
 * write says its site again.
 * @param {Function} w
 * @param {number} fdv
 */
function sayStdio(w, fdv) {
  let st = stdio.get(fdv);
  if (st === undefined) {
    if (stdio.size >= 16) stdio.clear();
    st = stdioState();
    stdio.set(fdv, st);
  }
  try {
    stdioSaid(w, fdv, st);
  } catch {
    discard();
    st.said = 0;
    st.len = 0;
  }
}

/**
 * The descriptor stream `s` (made for descriptor `fdv`) writes to: its handle's (a pipe's
 * is `fdv`; a terminal's another one, libuv's), else `fdv` (a file's SyncWriteStream
 * writes on it with fs.writeSync).
 * @param {any} s
 * @param {number} fdv
 */
function handleFd(s, fdv) {
  try {
    const h = s !== null && typeof s === 'object' ? s._handle : null;
    const f = h !== null && typeof h === 'object' ? h.fd : undefined;
    return typeof f === 'number' && f >= 0 ? f : fdv;
  } catch {
    return fdv;
  }
}

/**
 * Wraps the write of stdio stream `s` (descriptor `fdv`), as an own property of the
 * stream.
 * @param {any} s
 * @param {number} fdv
 */
function wrapStdioWrite(s, fdv) {
  if (s === null || typeof s !== 'object') return;
  const o = s.write;
  if (typeof o !== 'function' || hasOwn.call(s, 'write')) return;
  /** @this {any} */
  const w = function () {
    if (new.target !== undefined) return ReflectConstruct(o, arguments, new.target);
    // Inside a wrapped call (depth), that call names the write.
    if (on && busy === 0 && depth === 0) sayStdio(w, handleFd(this, fdv));
    busy++;
    const lim = raiseLimit();
    try {
      return ReflectApply(o, this, arguments);
    } finally {
      restoreLimit(lim);
      busy--;
    }
  };
  lookAlike(o, w);
  defineOwn(s, 'write', w, true);
}

/** Wraps process.stdout's and process.stderr's write when the program first gets them
 * (the getters make them on first use: the agent must not make them itself). */
function wrapStdio() {
  for (const [name, fdv] of /** @type {Array<[string, number]>} */ ([
    ['stdout', 1],
    ['stderr', 2],
  ])) {
    try {
      const d = Object.getOwnPropertyDescriptor(process, name);
      if (d === undefined || typeof d.get !== 'function' || !d.configurable) continue;
      const get = d.get;
      let done = false;
      /** @this {unknown} */
      const g = function () {
        const s = ReflectApply(get, this, arguments);
        if (!done && on) {
          done = true;
          try {
            wrapStdioWrite(s, fdv);
          } catch {
            // unwrapped
          }
        }
        return s;
      };
      lookAlike(get, g);
      Object.defineProperty(process, name, { ...d, get: g });
      restorers.push(() => {
        const now = Object.getOwnPropertyDescriptor(process, name);
        if (now !== undefined && now.get === g) Object.defineProperty(process, name, d);
      });
    } catch {
      // unwrapped
    }
  }
}

// ---------------------------------------------------------------------------------------
// fs streams: fs.createReadStream and fs.createWriteStream make their calls (open, read,
// write, close) later, from Node.js's stream code, with no line of the program's on the
// stack. Each stream created here gets its own fs object (the stream's kFs, which its
// code calls), which reports the line that created the stream, or, for writes, the line
// of the program's last write() to it.

/** @type {symbol | null | undefined} */
let kFsSymbol;

/** @param {any} s */
function streamFsKey(s) {
  if (kFsSymbol === undefined) {
    kFsSymbol = null;
    for (const k of Object.getOwnPropertySymbols(s)) {
      if (k.description === 'kFs') kFsSymbol = k;
    }
  }
  return kFsSymbol;
}

const STREAM_FS = ['open', 'close', 'read', 'write', 'writev', 'fsync'];

/**
 * Gives stream `s`, created at `site`, its own reporting fs object; a write stream's
 * write() and end() record the program's line of each write.
 * @param {any} s
 * @param {number} site
 * @param {boolean} writable
 */
function adoptStream(s, site, writable) {
  const key = streamFsKey(s);
  if (key === null || key === undefined) return;
  const base = s[key];
  if (base === null || (typeof base !== 'object' && typeof base !== 'function')) return;
  const state = { site, write: site };
  const proxy = Object.create(base);
  for (const m of STREAM_FS) {
    const f = base[m];
    if (typeof f !== 'function') continue;
    const forWrite = m === 'write' || m === 'writev';
    proxy[m] = function () {
      const prev = forced;
      forced = forWrite ? state.write : state.site;
      try {
        return ReflectApply(f, base, arguments);
      } finally {
        forced = prev;
      }
    };
  }
  s[key] = proxy;
  if (!writable) return;
  for (const m of ['write', 'end']) {
    const o = s[m];
    if (typeof o !== 'function') continue;
    /** @this {unknown} */
    const w = function () {
      if (new.target !== undefined) return ReflectConstruct(o, arguments, new.target);
      if (on && busy === 0 && (m === 'write' || (arguments.length > 0 && typeof arguments[0] !== 'function'))) {
        try {
          const st = siteOf(w, FRAMES);
          if (st !== 0 && siteOwn) state.write = st;
        } catch {
          discard();
        }
      }
      const lim = raiseLimit();
      try {
        return ReflectApply(o, this, arguments);
      } finally {
        restoreLimit(lim);
      }
    };
    lookAlike(o, w);
    defineOwn(s, m, w, false);
  }
}

/**
 * fs.createReadStream / fs.createWriteStream.
 * @param {Function} o
 * @param {boolean} writable
 */
function wrapCreateStream(o, writable) {
  /** @this {unknown} */
  const w = function () {
    if (new.target !== undefined) return ReflectConstruct(o, arguments, new.target);
    if (!on || busy !== 0) return ReflectApply(o, this, arguments);
    let site = 0;
    try {
      site = siteOf(w, FRAMES);
    } catch {
      discard();
    }
    busy++;
    const lim = raiseLimit();
    let s;
    try {
      s = ReflectApply(o, this, arguments);
    } finally {
      restoreLimit(lim);
      busy--;
    }
    if (site !== 0) {
      try {
        adoptStream(s, site, writable);
      } catch {
        // the stream reports nothing
      }
    }
    return s;
  };
  lookAlike(o, w);
  return w;
}

// ---------------------------------------------------------------------------------------
// FileHandle (fs.promises.open): its methods run on the threadpool. Its class is not
// exported: the EventEmitter constructor that every FileHandle runs calls
// EventEmitter.init (looked up each time), where the agent sees the handles made while an
// fs.promises.open is in flight. The first shows FileHandle's prototype, whose methods are
// wrapped from then on (FD for the call's line); each handle an open settles with gets FD
// for the open's line until it is closed (its close(), an own property of each handle,
// and whatever no method reported).

const FILE_HANDLE = [
  'appendFile', 'chmod', 'chown', 'datasync', 'read', 'readv', 'readFile', 'stat', 'sync',
  'truncate', 'utimes', 'write', 'writev', 'writeFile',
];
/** 0: not watched yet, 1: watching, 2: cannot. */
let fileHandleState = 0;
/** @type {object | null} */
let fileHandleProto = null;
/** The last FileHandle made while an open was in flight, and settleSeq then. */
/** @type {any} */
let lastHandle = null;
let handleSeq = -1;
/** Promises settled so far (while the promise hook is on). */
let settleSeq = 0;
/** fs.promises.open calls in flight: request -> site. */
/** @type {Map<number, number>} */
const opens = new Map();

/** Watches the EventEmitters made while an fs.promises.open is in flight. */
function watchFileHandle() {
  if (fileHandleState !== 0) return;
  fileHandleState = 2;
  try {
    // EventEmitter.init: Node.js's own (every EventEmitter's constructor calls it), not in
    // its typings.
    const EE = /** @type {any} */ (require('events'));
    const d = Object.getOwnPropertyDescriptor(EE, 'init');
    if (d === undefined || !d.writable || typeof d.value !== 'function') return;
    const orig = d.value;
    /** @this {any} */
    const probe = function () {
      if (opens.size > 0 && this !== null && typeof this === 'object') {
        try {
          const proto = Object.getPrototypeOf(this);
          if (fileHandleProto === null) {
            const ctor = proto !== null ? proto.constructor : null;
            if (typeof ctor === 'function' && ctor.name === 'FileHandle' && hasOwn.call(proto, 'readFile')) {
              fileHandleProto = proto;
              for (const name of FILE_HANDLE) {
                install(proto, name, (o) => wrapPromise(o, name, handleBegin));
              }
            }
          }
          if (proto === fileHandleProto) {
            lastHandle = this;
            handleSeq = settleSeq;
          }
        } catch {
          // not ours to see
        }
      }
      return ReflectApply(orig, this, arguments);
    };
    lookAlike(orig, probe);
    EE.init = probe;
    fileHandleState = 1;
    restorers.push(() => {
      if (EE.init === probe) EE.init = orig;
    });
  } catch {
    // no FileHandle reports
  }
}

/**
 * fs.promises.open: as the other promise APIs, and the handle it settles with is watched.
 * @param {Function} w
 * @param {any} _self
 * @param {IArguments} args
 */
function openBegin(w, _self, args) {
  if (fileHandleState === 0) watchFileHandle();
  const req = asyncBegin(w, 'p', args, ASYNC_OPEN);
  if (req !== 0 && fileHandleState === 1) {
    if (opens.size > 4096) opens.clear();
    opens.set(req, lastSite);
  }
  return req;
}

/**
 * The open `req` settled with FileHandle `h`: its descriptor's calls are the open's
 * line's until it is closed.
 * @param {number} req
 * @param {any} h
 */
function handleOpened(req, h) {
  lastHandle = null;
  try {
    const site = opens.get(req);
    const fdv = h.fd;
    if (site === undefined || site === 0 || typeof fdv !== 'number' || !Number.isInteger(fdv) || fdv < 0) return;
    fdMessage(site, 0, fdv);
    flush();
  } catch {
    discard();
  }
}

// Which path(s) or descriptor each asynchronous call names in its syscalls (see targetsOf).
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
  for (let i = restorers.length - 1; i >= 0; i--) {
    try {
      restorers[i]();
    } catch {
      // leave it
    }
  }
  restorers.length = 0;
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
  // This thread's id, from /proc: a worker runs on a thread of its own; the main thread's
  // id is the process's. (One readlink, where require('worker_threads') to ask
  // isMainThread loaded six modules, ~2 ms of every Node.js start.)
  const m = /\/task\/(\d+)$/.exec(String(readlinkSync('/proc/thread-self')));
  if (m === null) return;
  tid = Number(m[1]);
  mainThread = tid === pid;
  ns = tid;
  const at = begin(HELLO, 12);
  u32(pid);
  u32(ns);
  u8(LANG_JS);
  end(at);
  if (!flush()) return;
  on = true;
  for (const name of SYNC) {
    install(fs, name, (o) => wrapSync(o, FRAMES, STICKY_SYNC.has(name), name === 'writeSync' || name === 'writevSync'));
  }
  const rp = /** @type {any} */ (fs.realpathSync);
  if (typeof rp === 'function') install(rp, 'native', (o) => wrapSync(o));
  for (const name of Object.keys(CALLBACK)) {
    install(fs, name, (o) => wrapCallback(o, CALLBACK[name], asyncKind(name)));
  }
  const rpc = /** @type {any} */ (fs.realpath);
  if (typeof rpc === 'function') install(rpc, 'native', (o) => wrapCallback(o, 'p', ASYNC_ANY));
  install(fs, 'createReadStream', (o) => wrapCreateStream(o, false));
  install(fs, 'createWriteStream', (o) => wrapCreateStream(o, true));
  /** @type {any} */
  let promises = null;
  try {
    promises = fs.promises;
  } catch {
    // none
  }
  if (promises !== null && typeof promises === 'object') {
    for (const name of Object.keys(PROMISES)) {
      const spec = PROMISES[name];
      install(promises, name, (o) =>
        wrapPromise(o, name, name === 'open' ? openBegin : (w, _self, args) => asyncBegin(w, spec, args, asyncKind(name))),
      );
    }
  }
  wrapChildProcess();
  wrapSystemInfo();
  if (mainThread) wrapStdio();
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
