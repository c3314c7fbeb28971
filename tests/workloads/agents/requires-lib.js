// requires-lib.js: the module requires.js loads.
'use strict';
module.exports = { answer: 42 };
