#!/usr/bin/env node
// tool/cli.js: a tool's bin, run as node_modules/.bin/tool (the test lays tool/ out as
// node_modules/tool and links the bin): the tool's files are the program's own.
//
// usage: node node_modules/.bin/tool FILE [N]   (N checks of FILE, default 1)
'use strict';
const { check } = require('../lib/work.js');

const n = process.argv.length > 3 ? parseInt(process.argv[3], 10) : 1;
for (let i = 0; i < n; i++) check(process.argv[2]);
