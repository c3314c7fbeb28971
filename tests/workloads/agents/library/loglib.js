// loglib: a logging library (the test lays it out as node_modules/loglib), whose write to
// stderr is ten frames deep in its own code: no frame of the program's among the first
// eight a stdio write's site looks at.
'use strict';

function down(n, msg) {
  if (n === 0) return process.stderr.write(msg + '\n');
  return down(n - 1, msg);
}

module.exports = {
  warn(msg) {
    return down(9, msg);
  },
};
