// repeated-lookup, dirty: every "request" stats the same unchanged config file.
const fs = require('fs');
const path = require('path');
const dir = process.argv[2];
const config = path.join(dir, 'config.json');
fs.writeFileSync(config, '{"port": 8080}');
let total = 0;
for (let i = 0; i < 100; i++) {
  total += fs.statSync(config).size; // asks again although nothing changed
}
console.log(`handled 100 requests (${total})`);
