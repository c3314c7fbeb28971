// spawns_dirty.js: a process per event, three ways (repeated-exec, crates/dejavu/tests/
// agent_gaps.rs): each `@site NAME` line starts the same command once per event, and the
// finding on that command must name the line. (qwen-code ran `git rev-parse` per chat
// record; the finding had no JavaScript line.)
//
// usage: node spawns_dirty.js [EVENTS]
'use strict';
const { execFileSync, spawn, exec } = require('child_process');

const events = Number(process.argv[2] || 12);

function syncEvent() {
  execFileSync('true', ['sync']); // @site sync syncEvent
}

function asyncEvent(done) {
  spawn('true', ['async']).on('exit', done); // @site async asyncEvent
}

function shellEvent(done) {
  exec('/bin/true shell', done); // @site shell shellEvent
}

(async () => {
  for (let i = 0; i < events; i++) syncEvent();
  for (let i = 0; i < events; i++) await new Promise((resolve) => asyncEvent(resolve));
  for (let i = 0; i < events; i++) await new Promise((resolve) => shellEvent(resolve));
})();
