// crash.js: a program that dies of an fs error, the way the user would see it: the
// message, the source line and the stack Node.js prints, and the exit status. Compared
// with and without dejavu's Node.js agent by crates/dejavu/tests/agents.rs.
//
// usage: node crash.js sync|callback|rejection|promise-handled-late DIR
'use strict';
const fs = require('fs');
const path = require('path');

const [mode, dir] = process.argv.slice(2);
const missing = path.join(dir, 'missing');

if (mode === 'sync') {
  // An uncaught error thrown by fs itself.
  fs.readFileSync(missing);
} else if (mode === 'callback') {
  // The program's own throw inside an fs callback.
  fs.stat(dir, (err, st) => {
    if (!err) throw new Error(`callback saw a directory: ${st.isDirectory()}`);
  });
} else if (mode === 'rejection') {
  // An fs.promises rejection nobody handles.
  fs.promises.stat(missing);
} else if (mode === 'promise-handled-late') {
  // Handled too late: the rejection is unhandled when it comes, and Node.js ends the
  // program exactly as without the agent. (The handler waits 2 s, not 10 ms: on a loaded
  // machine the access could take longer than 10 ms, the handler then came first and the
  // program exited 0, natively or not, at random.)
  const p = fs.promises.access(missing);
  setTimeout(() => p.catch((e) => console.log('handled late', e.code)), 2000);
} else {
  process.exit(2);
}
