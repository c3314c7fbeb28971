// stdio_turns.js: lines that take turns writing to stderr through console.error (and one
// through fs.writeSync(2, ...), which says its site as process.stderr's writes do), a
// helper called from two lines one after the other (the same innermost frames, callers
// that differ: the last checkpoint, then the end), and a library whose write is ten
// frames deep in its own code (the test lays out library/loglib.js as
// node_modules/loglib beside this file). Each write(2) must carry the line that made it,
// also when the agent says a site once for a run of writes.
//
// usage: node stdio_turns.js [ITEMS]
'use strict';
const fs = require('fs');
const loglib = require('loglib');

const items = Number(process.argv[2] || 50);

function note(msg) {
  console.error(msg); // @site note note
}

function onItem(i) {
  console.error('item %d', i); // @site item onItem
  if (i % 25 === 24) loglib.warn('slow item ' + i); // @site library onItem
  if (i % 10 === 9) note('checkpoint ' + i); // @site checkpoint onItem
  if (i % 20 === 19) fs.writeSync(2, 'sync ' + i + '\n'); // @site sync onItem
}

function atEnd(n) {
  note('done ' + n); // @site end atEnd
}

for (let i = 0; i < items; i++) onItem(i); // @site loop <anonymous>
atEnd(items);
