// requests.js: a Node.js program that reads its config per "request" (statSync and
// readFileSync), and reports each request on stdout. Run twice, its findings must be the
// same, with the same keys, whatever pipe its stdout is (crates/dejavu/tests/findings.rs).
// Usage: node requests.js DIR N
'use strict';
const fs = require('fs');
const path = require('path');

function loadConfig(dir) {
  const file = path.join(dir, 'config.json');
  fs.statSync(file);
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function handle(dir, i) {
  const cfg = loadConfig(dir);
  process.stdout.write(`request ${i} served by ${cfg.name}\n`);
}

const [dir, n] = [process.argv[2], Number(process.argv[3] || 50)];
fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ name: 'app' }));
setTimeout(() => {
  for (let i = 0; i < n; i++) handle(dir, i);
}, 0);
