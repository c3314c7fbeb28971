// repeated-output, dirty twin (seed 002): a configuration warning logged again for every
// inbound message, each line stamped with the time.
//
// Usage: node dirty.js [MESSAGES]
'use strict';

const settings = { loadTest: true };

function checkAccess(msg) {
  if (settings.loadTest) {
    console.warn(
      `${new Date().toISOString()} [WARN] bypassing socket.io authentication and ` +
        'authorization (settings.loadTest is true)',
    );
    return true;
  }
  return msg.token === 'secret';
}

const n = Number(process.argv[2] || 100);
let allowed = 0;
for (let i = 0; i < n; i++) {
  if (checkAccess({ type: 'CLIENT_READY', id: i })) allowed++;
}
console.log(`handled ${n} messages, ${allowed} allowed`);
