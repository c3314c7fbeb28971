// repeats_lines.js: many paths, each called a few times from several lines, for the
// repeated-call test of a path's first calls (crates/dejavu/tests/agents.rs): a loop that
// stats each path at one line and again, later, at another calls each path from each line
// once or twice. Every call must name its own line: the agent checks each of a path's
// first calls. Each `@line NAME` marks a line whose calls the test counts.
//
// usage: node repeats_lines.js DIR   (makes DIR/each)
'use strict';
const fs = require('fs');
const path = require('path');

const d = path.join(process.argv[2], 'each');
fs.mkdirSync(d);
const ones = [];
const twos = [];
for (let i = 0; i < 40; i++) {
  ones.push(path.join(d, `one${i}`));
  twos.push(path.join(d, `two${i}`));
}
for (const p of ones.concat(twos)) fs.closeSync(fs.openSync(p, 'w'));

for (const p of ones) fs.statSync(p); // @line A
for (const p of ones) fs.statSync(p); // @line B
for (const p of ones) fs.statSync(p); // @line C

for (const p of twos) {
  for (let i = 0; i < 2; i++) fs.statSync(p); // @line E
}
for (const p of twos) fs.statSync(p); // @line F
