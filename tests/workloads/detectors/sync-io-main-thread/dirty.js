// sync-io-main-thread, dirty twin (seed 000): an HTTP server whose every request reads
// config.json and stats data.txt with the *Sync APIs, blocking the event loop each time.
// The same process then asks it REQUESTS times, one after another, and exits.
//
// Usage: node dirty.js [REQUESTS]   (in a directory with config.json and data.txt)
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

const configPath = path.join(process.cwd(), 'config.json');
const dataPath = path.join(process.cwd(), 'data.txt');

function handle(i) {
  const cfg = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  const st = fs.statSync(dataPath);
  return cfg.greeting.length + st.size + i;
}

let served = 0;
const server = http.createServer((req, res) => {
  res.end(String(handle(served++)));
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
