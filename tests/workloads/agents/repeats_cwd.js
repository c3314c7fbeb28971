// repeats_cwd.js: the Node.js twin of repeats_cwd.py, for the repeated-call tests of the
// working directory (crates/dejavu/tests/agents.rs). One line stats an absolute path in
// a loop, another line another absolute path after a chdir, a third a relative path there
// (the first file again): every call must name its line. The agent needs the working directory for a relative
// path only: process.cwd is wrapped here to count the agent's reads of it during the
// absolute loops, printed before the relative one ("cwd calls: N").
// Each `@line NAME` marks a line whose calls the test counts.
//
// usage: node repeats_cwd.js DIR   (DIR holds the files `stat` and `phase`)
'use strict';
const fs = require('fs');
const path = require('path');

const dir = process.argv[2];
const p = path.join(dir, 'stat');
const q = path.join(dir, 'phase');

let reads = 0;
const realCwd = process.cwd;
process.cwd = function cwd() {
  reads++;
  return realCwd.call(process);
};

function absolute() {
  for (let i = 0; i < 300; i++) fs.statSync(p); // @line S
}

function absoluteThere() {
  for (let i = 0; i < 300; i++) fs.statSync(q); // @line T
}

function relative() {
  for (let i = 0; i < 300; i++) fs.statSync('stat'); // @line R
}

absolute();
process.chdir(dir);
absoluteThere();
process.stdout.write(`cwd calls: ${reads}\n`);
relative();
