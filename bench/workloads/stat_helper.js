// stat_helper.js: the Node.js workload of bench/agents.py for a helper doing I/O on one
// path for two callers: a helper `run` that fs.statSync's one file n times, called from
// one line for a warm-up of 100 calls, then from another for N calls (default 200000).
// A site includes the callers, so the second line's calls switch the path's site (the
// agent's "Repeated calls", docs/agents.md). One line on stdout that depends only on N
// and the file.
//
// usage: node stat_helper.js [N] [FILE]   (FILE defaults to this script)
'use strict';
const fs = require('fs');

const n = process.argv.length > 2 ? parseInt(process.argv[2], 10) : 200000;
const file = process.argv.length > 3 ? process.argv[3] : __filename;
if (!(n >= 0)) {
  process.stderr.write('usage: node stat_helper.js [N] [FILE]\n');
  process.exit(2);
}

/**
 * @param {string} f
 * @param {number} k
 * @returns {number} the sum of the sizes (keeps the calls observable)
 */
function run(f, k) {
  let total = 0;
  for (let i = 0; i < k; i++) total += fs.statSync(f).size;
  return total;
}

run(file, 100); // the warm-up
const total = run(file, n); // the timed run
process.stdout.write(`stat_helper.js: ${n} statSync, size sum ${total}\n`);
