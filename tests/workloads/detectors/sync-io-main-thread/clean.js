// sync-io-main-thread, clean twin: the same requests with fs.promises, so the file work
// runs on libuv's threadpool and the main thread only awaits it.
//
// Usage: node clean.js [REQUESTS]   (in a directory with config.json and data.txt)
'use strict';

const fs = require('fs');
const path = require('path');

const configPath = path.join(process.cwd(), 'config.json');
const dataPath = path.join(process.cwd(), 'data.txt');

async function handle(i) {
  const cfg = JSON.parse(await fs.promises.readFile(configPath, 'utf8'));
  const st = await fs.promises.stat(dataPath);
  return cfg.greeting.length + st.size + i;
}

async function main() {
  const n = Number(process.argv[2] || 100);
  let total = 0;
  for (let i = 0; i < n; i++) {
    total += await handle(i);
  }
  console.log(`handled ${n} requests (${total})`);
}
main();
