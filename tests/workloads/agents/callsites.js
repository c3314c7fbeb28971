// callsites.js: fs calls from known lines, each on a file of its own, for the call-site
// tests (crates/dejavu/tests/agents.rs): each `@site NAME FUNCTION` marks the line whose
// calls on DIR/NAME must carry that line and function as their innermost frame.
//
// usage: node callsites.js DIR   (DIR holds a file for each site name)
'use strict';
const fs = require('fs');
const fsp = require('fs/promises');
const path = require('path');
const { Worker } = require('worker_threads');
const { execFileSync } = require('child_process');

const dir = process.argv[2];
const at = (name) => path.join(dir, name);

function statSyncSite() {
  return fs.statSync(at('sync')).size; // @site sync statSyncSite
}

function statCallbackSite(done) {
  fs.stat(at('callback'), (err) => done(err)); // @site callback statCallbackSite
}

async function statPromiseSite() {
  await fsp.stat(at('promise')); // @site promise statPromiseSite
}

async function readFilePromiseSite() {
  return fsp.readFile(at('readfile')); // @site readfile readFilePromiseSite
}

function relativeCallbackSite(done) {
  fs.access('relative', done); // @site relative relativeCallbackSite
}

function writeStreamSite() {
  return fs.createWriteStream(at('stream')); // @site stream writeStreamSite
}

function writeToStream(ws, text) {
  ws.write(text); // @site stream-write writeToStream
}

function readStreamSite() {
  return fs.createReadStream(at('readstream')); // @site readstream readStreamSite
}

async function fileHandleOpenSite() {
  return fsp.open(at('filehandle'), 'r+'); // @site filehandle fileHandleOpenSite
}

async function fileHandleReadSite(fh) {
  await fh.read(Buffer.alloc(4), 0, 4, 0); // @site filehandle-read fileHandleReadSite
}

async function main() {
  statSyncSite();
  statSyncSite();
  await new Promise((resolve, reject) => statCallbackSite((e) => (e ? reject(e) : resolve())));
  await statPromiseSite();
  await readFilePromiseSite();
  // fs streams: their calls run later, from Node.js's stream code.
  const ws = writeStreamSite();
  await new Promise((resolve) => ws.once('open', resolve));
  for (let i = 0; i < 3; i++) writeToStream(ws, `line ${i}\n`);
  await new Promise((resolve, reject) => ws.end((e) => (e ? reject(e) : resolve())));
  await new Promise((resolve, reject) => {
    const rs = readStreamSite();
    rs.on('data', () => {});
    rs.on('error', reject);
    rs.on('close', resolve);
  });
  // A FileHandle: its methods on the threadpool, its close the open's line.
  const fh = await fileHandleOpenSite();
  await fileHandleReadSite(fh);
  await fh.close();
  process.chdir(dir);
  await new Promise((resolve, reject) => relativeCallbackSite((e) => (e ? reject(e) : resolve())));
  await new Promise((resolve, reject) => {
    const w = new Worker(path.join(__dirname, 'callsites-worker.js'), { workerData: at('worker') });
    w.on('error', reject);
    w.on('exit', resolve);
  });
  execFileSync(process.execPath, [path.join(__dirname, 'callsites-child.js'), at('child')], { stdio: 'inherit' });
  process.stdout.write('callsites.js done\n');
}

main().catch((e) => {
  process.stderr.write(`callsites.js failed: ${e.stack}\n`);
  process.exit(1);
});
