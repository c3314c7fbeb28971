// library.js: the program's line behind a library's call several frames deep (the test lays
// out library/deeplib.js as node_modules/deeplib beside this file).
//
// usage: node library.js FILE
'use strict';
const { cache } = require('deeplib');

function handleRequest(p) {
  return cache.lookup(p); // @site library handleRequest
}

handleRequest(process.argv[2]);
