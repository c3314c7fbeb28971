// jit_requires.js: Node.js's module loader at work, its calls made outside the agent's
// wrappers (the loader stats and reads through its own bindings), so each sends a copy
// of its native stack; run with --always-sparkplug, every JavaScript frame on those
// stacks is JIT code (anonymous memory, no file).
//
// usage: node --always-sparkplug jit_requires.js DIR N   (writes DIR/mI.js, requires each)
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, n] = [process.argv[2], Number(process.argv[3])];
for (let i = 0; i < n; i++) fs.writeFileSync(path.join(dir, `m${i}.js`), `module.exports = ${i};\n`);
let sum = 0;
for (let i = 0; i < n; i++) sum += require(path.join(dir, `m${i}.js`));
console.log(sum);
