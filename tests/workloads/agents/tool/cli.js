#!/usr/bin/env node
// tool/cli.js: a tool's bin, run as node_modules/.bin/tool (the test lays tool/ out as
// node_modules/tool and links the bin): the tool's files are the program's own.
//
// usage: node node_modules/.bin/tool FILE
'use strict';
const { check } = require('../lib/work.js');

check(process.argv[2]);
