// deeplib: a library the program uses (the test lays it out as node_modules/deeplib), whose
// file call is several frames deep in its own code, one of them a callback.
'use strict';
const fs = require('fs');

function statFile(p) {
  return fs.statSync(p);
}
function loadEntry(p) {
  return statFile(p);
}
function loadAll(paths) {
  return paths.map((p) => loadEntry(p));
}
class Cache {
  lookup(p) {
    return loadAll([p])[0];
  }
}
module.exports = { cache: new Cache() };
