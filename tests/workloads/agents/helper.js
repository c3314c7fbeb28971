// helper.js: a helper doing I/O on one path for two callers, one after the other (a
// warm-up of 50 calls, then 2000), for the test that a path whose site switched once is
// not checked at every call for good (crates/dejavu/tests/agents.rs; docs/agents.md
// "Repeated calls"). Each `@line NAME` marks a caller whose calls the test counts. Prints
// how many stack captures the agent made from the warm-up on: it sets
// Error.prepareStackTrace once per capture, which an accessor here counts (as switch.js).
//
// usage: node helper.js DIR   (DIR holds the file `stat`)
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

run(p, 50); // @line W
run(p, 2000); // @line T
process.stdout.write(`captures ${captures} for 2050 stats\n`);
