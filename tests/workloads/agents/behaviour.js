// behaviour.js: everything a program can observe of the fs module, printed one line at a
// time, so a run with dejavu's Node.js agent can be compared byte for byte with a run
// without it (crates/dejavu/tests/agents.rs). Sync, callback and promise APIs; results,
// errors (ENOENT, EISDIR, bad arguments), `this`, arity, function properties, the order
// of callbacks, ticks and microtasks.
//
// usage: node behaviour.js DIR   (DIR: an empty scratch directory)
'use strict';
const fs = require('fs');
const fsp = require('fs/promises');
const path = require('path');
const util = require('util');

const dir = process.argv[2];
const rel = (p) => (typeof p === 'string' ? path.relative(dir, p) : p);

/** One line per observation; values that vary between runs (times, inodes) left out. */
function out(what, v) {
  process.stdout.write(`${what}: ${typeof v === 'string' ? v : util.inspect(v, { depth: 3, breakLength: Infinity })}\n`);
}

/** What a program sees of an error (its stack minus the program's own frames' paths). */
function error(e) {
  if (!(e instanceof Error)) return { notError: e };
  return {
    ctor: e.constructor.name,
    name: e.name,
    message: e.message.split(dir).join('DIR'),
    code: e.code,
    errno: e.errno,
    syscall: e.syscall,
    path: rel(e.path),
    dest: rel(e.dest),
    keys: Object.keys(e),
    stack: String(e.stack).split(dir).join('DIR'),
  };
}

function attempt(what, f) {
  try {
    out(what, f());
  } catch (e) {
    out(`${what} threw`, error(e));
  }
}

function stats(st) {
  return st === undefined ? 'undefined' : { file: st.isFile(), dir: st.isDirectory(), size: st.size, mode: st.mode };
}

const a = path.join(dir, 'a.txt');
const sub = path.join(dir, 'sub');
const missing = path.join(dir, 'missing');

// ---- synchronous APIs
fs.writeFileSync(a, 'hello\n');
attempt('writeFileSync again', () => fs.writeFileSync(a, 'hello\nworld\n', { encoding: 'utf8' }));
attempt('appendFileSync', () => fs.appendFileSync(a, 'more\n'));
attempt('statSync', () => stats(fs.statSync(a)));
attempt('statSync bigint', () => typeof fs.statSync(a, { bigint: true }).size);
attempt('lstatSync', () => stats(fs.lstatSync(a)));
attempt('statSync missing', () => fs.statSync(missing));
attempt('statSync missing no throw', () => stats(fs.statSync(missing, { throwIfNoEntry: false })));
attempt('statSync no argument', () => fs.statSync());
attempt('statSync bad type', () => fs.statSync(42.5));
attempt('existsSync', () => [fs.existsSync(a), fs.existsSync(missing), fs.existsSync(), fs.existsSync({})]);
attempt('accessSync', () => fs.accessSync(a, fs.constants.R_OK));
attempt('accessSync missing', () => fs.accessSync(missing));
attempt('readFileSync', () => fs.readFileSync(a, 'utf8'));
attempt('readFileSync buffer', () => fs.readFileSync(a).length);
attempt('readFileSync EISDIR', () => fs.readFileSync(dir));
attempt('readFileSync missing', () => fs.readFileSync(missing));
attempt('mkdirSync recursive', () => rel(fs.mkdirSync(path.join(sub, 'x', 'y'), { recursive: true })));
attempt('mkdirSync exists', () => fs.mkdirSync(sub));
attempt('mkdirSync one argument', () => fs.mkdirSync(path.join(dir, 'one')));
attempt('mkdirSync undefined mode', () => fs.mkdirSync(path.join(dir, 'two'), undefined));
attempt('readdirSync', () => fs.readdirSync(dir).sort());
attempt('readdirSync types', () => fs.readdirSync(dir, { withFileTypes: true }).map((d) => [d.name, d.isDirectory()]).sort());
attempt('readdirSync file', () => fs.readdirSync(a));
attempt('realpathSync', () => rel(fs.realpathSync(path.join(sub, 'x', '..', 'x'))));
attempt('realpathSync.native', () => rel(fs.realpathSync.native(sub)));
attempt('realpathSync.native missing', () => fs.realpathSync.native(missing));
attempt('opendirSync missing', () => fs.opendirSync(missing));
attempt('symlinkSync', () => fs.symlinkSync('a.txt', path.join(dir, 'link')));
attempt('readlinkSync', () => fs.readlinkSync(path.join(dir, 'link')));
attempt('lstatSync link', () => fs.lstatSync(path.join(dir, 'link')).isSymbolicLink());
attempt('copyFileSync', () => fs.copyFileSync(a, path.join(dir, 'b.txt')));
attempt('copyFileSync missing', () => fs.copyFileSync(missing, path.join(dir, 'c.txt')));
attempt('renameSync', () => fs.renameSync(path.join(dir, 'b.txt'), path.join(dir, 'c.txt')));
attempt('truncateSync', () => fs.truncateSync(path.join(dir, 'c.txt'), 3));
attempt('unlinkSync', () => fs.unlinkSync(path.join(dir, 'c.txt')));
attempt('unlinkSync missing', () => fs.unlinkSync(missing));
attempt('rmSync', () => fs.rmSync(path.join(dir, 'one'), { recursive: true }));
attempt('rmdirSync', () => fs.rmdirSync(path.join(dir, 'two')));
attempt('mkdtempSync', () => path.basename(fs.mkdtempSync(path.join(dir, 'tmp-'))).length);
attempt('fd round trip', () => {
  const fd = fs.openSync(path.join(dir, 'fd.txt'), 'w+');
  const w1 = fs.writeSync(fd, 'abc'); // string form
  const w2 = fs.writeSync(fd, Buffer.from('defg'), 1, 2); // buffer, offset, length
  const w3 = fs.writeSync(fd, 'xy', 0); // string, position
  const buf = Buffer.alloc(8);
  const r = fs.readSync(fd, buf, 0, 8, 0);
  const st = fs.fstatSync(fd).size;
  fs.closeSync(fd);
  return [typeof fd, w1, w2, w3, r, buf.toString('latin1'), st];
});
attempt('closeSync twice', () => {
  const fd = fs.openSync(a, 'r');
  fs.closeSync(fd);
  return fs.closeSync(fd);
});
attempt('openSync missing', () => fs.openSync(missing, 'r'));
attempt('this is passed through', () => fs.statSync.call({ not: 'fs' }, a).size);
attempt('apply with extra arguments', () => fs.existsSync.apply(null, [a, 1, 2, 3]));

// ---- what the functions look like
const names = ['statSync', 'readFileSync', 'openSync', 'stat', 'readFile', 'exists', 'read', 'realpath', 'realpathSync', 'opendir', 'opendirSync'];
for (const n of names) {
  const f = fs[n];
  out(`fs.${n}`, { type: typeof f, name: f.name, length: f.length, keys: Reflect.ownKeys(f).map(String) });
}
for (const n of ['stat', 'readFile', 'open', 'writeFile']) {
  const f = fsp[n];
  out(`fsp.${n}`, { type: typeof f, name: f.name, length: f.length, keys: Reflect.ownKeys(f).map(String), same: fs.promises[n] === f });
}
out('realpathSync.native', [typeof fs.realpathSync.native, fs.realpathSync.native.name]);
for (const [n, f] of [['realpathSync.native', fs.realpathSync.native], ['realpath.native', fs.realpath.native]]) {
  out(`${n} shape`, { name: f.name, length: f.length, keys: Reflect.ownKeys(f).map(String), prototype: Object.prototype.hasOwnProperty.call(f, 'prototype') });
}
out('opendirSync property', Object.keys(Object.getOwnPropertyDescriptor(fs, 'opendirSync') || {}));
out('promisify.custom on exists', typeof fs.exists[util.promisify.custom]);
{
  const os = require('os');
  for (const [n, f] of [['os.cpus', os.cpus], ['os.totalmem', os.totalmem], ['os.availableParallelism', os.availableParallelism], ['process.memoryUsage', process.memoryUsage], ['process.memoryUsage.rss', process.memoryUsage.rss], ['process.report.getReport', process.report.getReport]]) {
    out(`${n} shape`, { type: typeof f, name: f.name, length: f.length, keys: Reflect.ownKeys(f).map(String), prototype: Object.prototype.hasOwnProperty.call(f, 'prototype') });
  }
  out('system information', [os.cpus().length === os.cpus().length, os.totalmem() > 0, Object.keys(process.memoryUsage()), typeof process.memoryUsage.rss(), typeof process.report.getReport().header.glibcVersionRuntime]);
}
out('Error settings', [Error.stackTraceLimit, typeof Error.prepareStackTrace, Object.getOwnPropertyNames(Error)]);

// ---- callbacks, promises, and their order against ticks and microtasks
function step(name, f) {
  return new Promise((resolve) => {
    try {
      f(resolve);
    } catch (e) {
      out(`${name} threw`, error(e));
      resolve();
    }
  });
}

async function asyncPart() {
  await step('stat callback', (done) =>
    fs.stat(a, function (err, st) {
      out('stat callback', [err, stats(st), this === undefined, arguments.length]);
      process.nextTick(() => out('tick after stat callback', 1));
      Promise.resolve().then(() => out('microtask after stat callback', 1));
      setImmediate(done);
    }),
  );
  await step('stat callback missing', (done) =>
    fs.stat(missing, (err, st) => {
      out('stat callback missing', [error(err), st]);
      done();
    }),
  );
  await step('readFile callback EISDIR', (done) =>
    fs.readFile(dir, (err, data) => {
      out('readFile callback EISDIR', [error(err), data]);
      done();
    }),
  );
  await step('readFile callback', (done) =>
    fs.readFile(a, 'utf8', (err, data) => {
      out('readFile callback', [err, data]);
      done();
    }),
  );
  await step('stat bad path', (done) => fs.stat(42.5, done));
  await step('stat without callback', () => fs.stat(a));
  await step('exists callback', (done) =>
    fs.exists(a, (...args) => {
      out('exists callback', args);
      done();
    }),
  );
  await step('open/read/close callbacks', (done) =>
    fs.open(a, 'r', (err, fd) => {
      const buf = Buffer.alloc(5);
      fs.read(fd, buf, 0, 5, 0, (err2, n, b) => {
        out('read callback', [err, err2, n, b === buf, buf.toString()]);
        fs.close(fd, (err3) => {
          out('close callback', [err3]);
          done();
        });
      });
    }),
  );
  out('promisify(exists)', await util.promisify(fs.exists)(a));
  const r = await util.promisify(fs.read)(fs.openSync(a, 'r'), Buffer.alloc(3), 0, 3, 0);
  out('promisify(read)', [Object.keys(r), r.bytesRead]);

  out('fsp.stat', stats(await fsp.stat(a)));
  out('fsp.readFile', await fsp.readFile(a, 'utf8'));
  for (const [name, f] of [
    ['fsp.stat missing', () => fsp.stat(missing)],
    ['fsp.readFile EISDIR', () => fsp.readFile(dir)],
    ['fsp.stat bad path', () => fsp.stat(42.5)],
    ['fsp.mkdir exists', () => fsp.mkdir(sub)],
  ]) {
    try {
      out(name, await f());
    } catch (e) {
      out(`${name} rejected`, error(e));
    }
  }
  // Two calls in flight: their settlement, ours and the microtasks around, in order.
  const order = [];
  const p1 = fsp.stat(a).then(() => order.push('p1'));
  Promise.resolve().then(() => order.push('m1'));
  await p1;
  order.push('after p1');
  queueMicrotask(() => order.push('m2'));
  await fsp.access(a).then(() => order.push('p2'));
  order.push('after p2');
  out('order', order);
  const fh = await fsp.open(a, 'r');
  const { bytesRead } = await fh.read(Buffer.alloc(4), 0, 4, 0);
  await fh.close();
  out('FileHandle', [bytesRead, typeof fh.fd]);
  out('Error settings at the end', [Error.stackTraceLimit, typeof Error.prepareStackTrace]);
}

asyncPart().then(
  () => out('done', true),
  (e) => out('async part failed', error(e)),
);
