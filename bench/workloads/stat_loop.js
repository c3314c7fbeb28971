// stat_loop.js: the Node.js stat-heavy workload of bench/overhead.py.
//
// fs.statSync of the same file N times (default 200000), then one line on stdout
// that depends only on N and the file, so the benchmark can check that a tracer
// did not change what the program did.
//
// usage: node stat_loop.js [N] [FILE]   (FILE defaults to this script)
'use strict';
const fs = require('fs');

const n = process.argv.length > 2 ? parseInt(process.argv[2], 10) : 200000;
const file = process.argv.length > 3 ? process.argv[3] : __filename;
if (!(n >= 0)) {
  process.stderr.write('usage: node stat_loop.js [N] [FILE]\n');
  process.exit(2);
}

// Summing the sizes keeps the calls observable, so nothing can elide them.
let total = 0;
for (let i = 0; i < n; i++) {
  total += fs.statSync(file).size;
}
process.stdout.write(`stat_loop.js: ${n} statSync, size sum ${total}\n`);
