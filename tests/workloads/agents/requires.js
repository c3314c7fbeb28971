// requires.js: a main module that require()s a module of its own, for the runtime-frame
// tests (crates/dejavu/tests/agents.rs): the module loader's calls on requires-lib.js
// carry the loader's frames and, further out, the require line (its `@site`
// marker names the function).
//
// usage: node requires.js
'use strict';
const lib = require('./requires-lib.js'); // @site require <anonymous>
process.stdout.write(`requires.js done: ${lib.answer}\n`);
