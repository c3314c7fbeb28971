// repeated-lookup, clean: the same work, the stat cached after the first request.
const fs = require('fs');
const path = require('path');
const dir = process.argv[2];
const config = path.join(dir, 'config.json');
fs.writeFileSync(config, '{"port": 8080}');
let cached = null;
let total = 0;
for (let i = 0; i < 100; i++) {
  cached = cached || fs.statSync(config);
  total += cached.size;
}
console.log(`handled 100 requests (${total})`);
