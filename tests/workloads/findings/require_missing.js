// require_missing.js: requires of a package that is nowhere, for the owner test in
// crates/dejavu/tests/findings.rs. Node.js's module loader looks for it in every
// node_modules directory from here up and in the global folders ($HOME/.node_modules,
// $HOME/.node_libraries, $PREFIX/lib/node), through its own C++ binding
// (internalModuleStat, which the agent does not wrap: it is not fs): the loader's
// look-ups are the runtime's, not the program's (their stacks have no JavaScript frame
// anyone could name).
//
// usage: node require_missing.js N   (N requires; 1 is the twin)
'use strict';
const n = Number(process.argv[2]);
let missing = 0;
for (let i = 0; i < n; i++) {
  try {
    require('dejavu-no-such-package'); // REQUIRE_MISSING
  } catch (e) {
    if (e.code === 'MODULE_NOT_FOUND') missing++;
  }
}
console.log(`require_missing.js: ${missing} of ${n} requires found no package`);
