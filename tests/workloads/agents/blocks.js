// blocks.js: a helper doing I/O on one path, called from two lines that take turns in
// blocks (30 times: 20 calls from A, then 20 from B), for the test that the agent's checks
// of a switched path, which decay after a calm run, still name the lines but for a bounded
// price (crates/dejavu/tests/agents.rs; docs/agents.md "Repeated calls"). Each `@line NAME`
// marks a caller whose calls the test counts. Prints the agent's stack captures (counted
// as in switch.js).
//
// usage: node blocks.js DIR   (DIR holds the file `stat`)
'use strict';
const fs = require('fs');
const path = require('path');

const p = path.join(process.argv[2], 'stat');
let prep;
let captures = 0;
Object.defineProperty(Error, 'prepareStackTrace', {
  configurable: true,
  get() {
    return prep;
  },
  set(v) {
    if (typeof v === 'function') captures++;
    prep = v;
  },
});

/**
 * @param {string} file
 * @param {number} n
 */
function run(file, n) {
  for (let i = 0; i < n; i++) fs.statSync(file);
}

for (let i = 0; i < 30; i++) {
  run(p, 20); // @line A
  run(p, 20); // @line B
}
process.stdout.write(`captures ${captures} for 1200 stats\n`);
