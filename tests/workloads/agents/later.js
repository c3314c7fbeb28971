// later.js: a library's calls with no frame of the program's on the stack (its own
// callbacks), then a call of the program's made from a callback the library calls, then a
// call thirteen of the library's frames deep (the test lays out library/laterlib.js as
// node_modules/laterlib beside this file).
//
// usage: node later.js DIR   (stats DIR/lib.json6 to lib.json1, DIR/data.json and
// DIR/deep.json)
'use strict';
const fs = require('fs');
const path = require('path');
const lib = require('laterlib');

const dir = process.argv[2];

function outer() {
  lib.each([path.join(dir, 'data.json')], (p) => fs.statSync(p)); // @site direct outer
  lib.deep(12, path.join(dir, 'deep.json')); // @site deep outer
}

lib.later(6, path.join(dir, 'lib.json'), outer);
