// repeated-output, clean twin: the configuration warning is logged once, at start-up.
//
// Usage: node clean.js [MESSAGES]
'use strict';

const settings = { loadTest: true };
if (settings.loadTest) {
  console.warn(
    `${new Date().toISOString()} [WARN] bypassing socket.io authentication and ` +
      'authorization (settings.loadTest is true)',
  );
}

function checkAccess(msg) {
  return settings.loadTest || msg.token === 'secret';
}

const n = Number(process.argv[2] || 100);
let allowed = 0;
for (let i = 0; i < n; i++) {
  if (checkAccess({ type: 'CLIENT_READY', id: i })) allowed++;
}
console.log(`handled ${n} messages, ${allowed} allowed`);
