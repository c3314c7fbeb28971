// switch.js: one path read by one function, then stat'ed N times from one line (the
// module loader's readFileSync of a script that then stats itself), for the test that a
// switch of function on a path does not make the agent check that path's site at every
// call (crates/dejavu/tests/agents.rs). Prints how many stack captures the agent made:
// it sets Error.prepareStackTrace once per capture, which an accessor here counts.
//
// usage: node switch.js FILE N
'use strict';
const fs = require('fs');

const [file, n] = [process.argv[2], Number(process.argv[3])];
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
fs.readFileSync(file);
const before = captures;
for (let i = 0; i < n; i++) fs.statSync(file);
process.stdout.write(`captures ${captures - before} for ${n} stats\n`);
