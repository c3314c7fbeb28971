// startup.js: a CommonJS main module's calls, a worker thread's, then a timer's, for the
// start-up mark tests (crates/dejavu/tests/agents.rs): the main module's calls are on
// DIR/main, the worker's on DIR/worker, the timer's on DIR/timer. The timer is set when
// the worker has exited, so every call of the main module and the worker comes first.
//
// usage: node startup.js DIR
'use strict';
const fs = require('fs');
const path = require('path');
const { Worker } = require('worker_threads');

const dir = process.argv[2];
const at = (name) => path.join(dir, name);

for (let i = 0; i < 3; i++) fs.statSync(at('main'));
const w = new Worker("require('fs').statSync(require('worker_threads').workerData);", {
  eval: true,
  workerData: at('worker'),
});
w.on('exit', () => {
  setTimeout(() => {
    fs.statSync(at('timer'));
    fs.statSync(at('timer'));
    process.stdout.write('startup.js done\n');
  }, 20);
});
fs.existsSync(at('main'));
