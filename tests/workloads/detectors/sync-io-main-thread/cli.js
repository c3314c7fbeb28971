// sync-io-main-thread, a command-line tool: the dirty twin's calls, one item per turn of
// the event loop, in a process that serves nobody (accepts no connection). Blocking its
// loop delays no one's request: not a finding (eslint's rule runs, yarn's linking).
//
// Usage: node cli.js [ITEMS]   (in a directory with config.json and data.txt)
'use strict';

const fs = require('fs');
const path = require('path');

const configPath = path.join(process.cwd(), 'config.json');
const dataPath = path.join(process.cwd(), 'data.txt');

function handle(i) {
  const cfg = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  const st = fs.statSync(dataPath);
  return cfg.greeting.length + st.size + i;
}

const n = Number(process.argv[2] || 100);
let done = 0;
let total = 0;
function next() {
  if (done === n) {
    console.log(`handled ${n} requests (${total})`);
    return;
  }
  total += handle(done++);
  setImmediate(next); // one request per event-loop turn
}
next();
