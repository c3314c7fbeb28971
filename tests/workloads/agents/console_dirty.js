// console_dirty.js: the same warning for every message (Etherpad's console.warn per
// message): each write to stderr must carry the console.warn line, whether stderr is a
// pipe (libuv writes it at once) or a file (a synchronous fs write).
//
// usage: node console_dirty.js [MESSAGES]
'use strict';

const messages = Number(process.argv[2] || 50);

function onMessage(i) {
  console.warn('bypassing authentication for message %d (loadTest)', i); // @site warn onMessage
}

for (let i = 0; i < messages; i++) onMessage(i);
process.stdout.write('done\n'); // @site stdout <anonymous>
