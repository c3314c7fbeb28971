// laterlib: a library (the test lays it out as node_modules/laterlib beside later.js) whose
// calls are made deep in its own code, some with no frame of the program's on the stack.
'use strict';
const fs = require('fs');

// Stats `p` `depth` of the library's frames deep.
function deep(depth, p) {
  return depth === 0 ? fs.statSync(p) : deep(depth - 1, p);
}

// Stats `p`N for N = n down to 1, each from a callback of its own after the first
// (setImmediate: no frame of the program's on the stack), then calls done(). (Each a path
// of its own: repeats of a call on one path are said once, STICKY.)
function later(n, p, done) {
  if (n === 0) {
    done();
    return;
  }
  deep(6, p + n);
  setImmediate(() => later(n - 1, p, done));
}

// Calls fn(p) for each path, three of the library's frames deep.
function each(paths, fn) {
  return paths.map((p) => one(p, fn));
}
function one(p, fn) {
  return two(p, fn);
}
function two(p, fn) {
  return fn(p);
}

module.exports = { deep, later, each };
