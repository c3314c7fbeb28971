// dejavu fixture: a compiled module run with Node.js's source maps on, as tsx runs
// TypeScript (it calls process.setSourceMapsEnabled(true) before loading the program).
// The agent names its calls at the TypeScript source's lines (mapped/src/app.ts).
process.setSourceMapsEnabled(true);
require('./mapped/dist/app.js');
