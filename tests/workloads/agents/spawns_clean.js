// spawns_clean.js: spawns_dirty.js with the fix: each command runs once, and every event
// reuses its result.
//
// usage: node spawns_clean.js [EVENTS]
'use strict';
const { execFileSync, spawn, exec } = require('child_process');

const events = Number(process.argv[2] || 12);

(async () => {
  const sync = execFileSync('true', ['sync']);
  const code = await new Promise((resolve) => spawn('true', ['async']).on('exit', resolve));
  const shell = await new Promise((resolve) => exec('/bin/true shell', (e) => resolve(e)));
  let seen = 0;
  for (let i = 0; i < events; i++) seen += sync.length + code + (shell ? 1 : 0);
  process.exitCode = seen === 0 ? 0 : 1;
})();
