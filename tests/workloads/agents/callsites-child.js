// callsites-child.js: a child process of callsites.js; its agent reports over the pipe
// it inherited.
'use strict';
const fs = require('fs');

function childSite(p) {
  return fs.lstatSync(p); // @site child childSite
}
childSite(process.argv[2]);
