// startup.mjs: the ES module twin of startup.js: the main module's calls on DIR/main,
// before and after a top-level await (the module has run once that is done), then a
// timer's on DIR/timer.
//
// usage: node startup.mjs DIR
import fs from 'fs';
import path from 'path';

const dir = process.argv[2];
const at = (name) => path.join(dir, name);

fs.statSync(at('main'));
await new Promise((resolve) => setTimeout(resolve, 20));
fs.statSync(at('main'));
setTimeout(() => {
  fs.statSync(at('timer'));
  process.stdout.write('startup.mjs done\n');
}, 20);
