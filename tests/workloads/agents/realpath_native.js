// realpath_native.js: the fs functions Node.js 20 defines in shapes the agent once left
// unwrapped: fs.realpathSync.native and fs.realpath.native are arrow functions (no
// prototype; TypeScript resolves every module through realpathSync.native, taken once),
// fs.opendirSync a lazy accessor. Each call must name its line (the directory's reads,
// made after opendirSync returned, name the line that opened it)
// (crates/dejavu/tests/agent_gaps.rs, node_fs_functions_of_every_shape_name_their_line).
//
// usage: node realpath_native.js DIR   (DIR holds data.json and other.json)
'use strict';

const fs = require('fs');
const path = require('path');

const dir = process.argv[2];
const file = path.join(dir, 'data.json');
const other = path.join(dir, 'other.json');
const real = fs.realpathSync.native;

function resolveAll(n) {
  for (let i = 0; i < n; i++) real(file); // @site native resolveAll
}

function listAll(n) {
  for (let i = 0; i < n; i++) {
    const d = fs.opendirSync(dir); // @site opendir listAll
    while (d.readSync() !== null);
    d.closeSync();
  }
}

resolveAll(20);
listAll(20);
fs.realpath.native(other, (err) => { if (err) throw err; }); // @site callback <anonymous>
