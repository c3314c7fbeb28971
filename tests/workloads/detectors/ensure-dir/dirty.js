// ensure-dir, dirty twin (seed 000 before its fix): every chat record ensures the
// directory and the file again — existsSync(dir) + mkdirSync(dir) + existsSync(file) +
// appendFileSync(file) — four sync calls per record. Run in a scratch directory.
'use strict';
const fs = require('fs');
const path = require('path');

const RECORDS = Number(process.argv[2] || 100);
const dir = path.join(process.cwd(), 'chats');
const file = path.join(dir, 'session.jsonl');

function appendRecord(record) {
  if (!fs.existsSync(dir)) {
    // The original code created it here; mkdirSync below also tolerates it existing.
  }
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(file)) {
    // First record of the session: the append below creates the file.
  }
  fs.appendFileSync(file, JSON.stringify(record) + '\n');
}

for (let i = 0; i < RECORDS; i++) {
  appendRecord({ uuid: i, type: i % 2 ? 'assistant' : 'user', text: 'message ' + i });
}
