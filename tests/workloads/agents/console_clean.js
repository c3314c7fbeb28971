// console_clean.js: console_dirty.js with the fix: the warning once, then a count.
//
// usage: node console_clean.js [MESSAGES]
'use strict';

const messages = Number(process.argv[2] || 50);
let bypassed = 0;

function onMessage() {
  if (bypassed++ === 0) console.warn('bypassing authentication (loadTest); counting the rest');
}

for (let i = 0; i < messages; i++) onMessage(i);
console.warn('%d messages bypassed authentication', bypassed);
process.stdout.write('done\n');
