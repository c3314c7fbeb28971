// console_loop.js: the Node.js console-heavy workload of bench/agents.py.
//
// console.log (out) or console.error (err) of N short lines (default 50000), then one
// line on stdout that depends only on N, so the benchmark can check that a tracer did
// not change what the program did. Under bench/agents.py both streams are pipes: each
// line is a write(2) on the calling thread (libuv writes to a pipe at once what it
// takes), which the agent names (docs/agents.md, "What the Node.js agent wraps").
//
// usage: node console_loop.js [N] [out|err]
'use strict';

const n = process.argv.length > 2 ? parseInt(process.argv[2], 10) : 50000;
const stream = process.argv.length > 3 ? process.argv[3] : 'out';
if (!(n >= 0) || (stream !== 'out' && stream !== 'err')) {
  process.stderr.write('usage: node console_loop.js [N] [out|err]\n');
  process.exit(2);
}

const say = stream === 'out' ? console.log : console.error;
for (let i = 0; i < n; i++) {
  say('line', i);
}
process.stdout.write(`console_loop.js: ${n} lines to std${stream}\n`);
