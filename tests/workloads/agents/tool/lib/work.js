// tool/lib/work.js: the tool's own code (see cli.js).
'use strict';
const fs = require('fs');

function check(p) {
  return fs.statSync(p); // @site tool check
}
module.exports = { check };
