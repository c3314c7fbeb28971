// ensure-dir, clean twin (seed 000 after its fix): the directory is ensured once — the
// flag is set only after mkdirSync succeeded, so a failed mkdir does not poison it — and
// records are buffered and written in one append, flushed on exit.
'use strict';
const fs = require('fs');
const path = require('path');

const RECORDS = Number(process.argv[2] || 100);
const dir = path.join(process.cwd(), 'chats');
const file = path.join(dir, 'session.jsonl');

let dirEnsured = false;
let pending = [];

function ensureDir() {
  if (dirEnsured) return;
  fs.mkdirSync(dir, { recursive: true });
  dirEnsured = true; // only reached when mkdirSync did not throw
}

function flush() {
  if (pending.length === 0) return;
  ensureDir();
  fs.appendFileSync(file, pending.join(''));
  pending = [];
}

function appendRecord(record) {
  pending.push(JSON.stringify(record) + '\n');
}

process.on('exit', flush);
for (let i = 0; i < RECORDS; i++) {
  appendRecord({ uuid: i, type: i % 2 ? 'assistant' : 'user', text: 'message ' + i });
}
