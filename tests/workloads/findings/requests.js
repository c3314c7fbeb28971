// requests.js: a Node.js HTTP server that reads its config per request (statSync and
// readFileSync), and reports each request on stdout; the same process asks it N times,
// one after another, then closes it. Run twice, its findings must be the same, with the
// same keys, whatever pipe its stdout is (crates/dejavu/tests/findings.rs).
// Usage: node requests.js DIR N
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');

function loadConfig(dir) {
  const file = path.join(dir, 'config.json');
  fs.statSync(file);
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function handle(dir, i) {
  const cfg = loadConfig(dir);
  process.stdout.write(`request ${i} served by ${cfg.name}\n`);
  return cfg.name;
}

const [dir, n] = [process.argv[2], Number(process.argv[3] || 50)];
fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ name: 'app' }));
let served = 0;
const server = http.createServer((req, res) => res.end(handle(dir, served++)));
const agent = new http.Agent({ keepAlive: false });
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  let done = 0;
  const ask = () => {
    if (done === n) {
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
