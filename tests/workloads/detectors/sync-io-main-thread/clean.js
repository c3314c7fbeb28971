// sync-io-main-thread, clean twin: the same server with fs.promises, so the file work
// runs on libuv's threadpool and the main thread only awaits it.
//
// Usage: node clean.js [REQUESTS]   (in a directory with config.json and data.txt)
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

const configPath = path.join(process.cwd(), 'config.json');
const dataPath = path.join(process.cwd(), 'data.txt');

async function handle(i) {
  const cfg = JSON.parse(await fs.promises.readFile(configPath, 'utf8'));
  const st = await fs.promises.stat(dataPath);
  return cfg.greeting.length + st.size + i;
}

let served = 0;
const server = http.createServer(async (req, res) => {
  res.end(String(await handle(served++)));
});

const n = Number(process.argv[2] || 100);
const agent = new http.Agent({ keepAlive: false });
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  let done = 0;
  const ask = () => {
    if (done === n) {
      console.log(`handled ${n} requests`);
      server.close();
      return;
    }
    http.get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      res.resume();
      res.on('end', () => {
        done++;
        ask();
      });
    });
  };
  ask();
});
