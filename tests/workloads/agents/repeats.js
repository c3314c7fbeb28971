// repeats.js: the same paths called from several lines, for the repeated-call tests
// (crates/dejavu/tests/agents.rs; the agent's STICKY, docs/agents.md "Repeated calls").
// The phases are 300 calls each: longer than the Node.js agent's check interval (256), so
// that the second line's change is found within them.
// Each `@line NAME` marks a line whose calls the test counts.
//
// usage: node repeats.js DIR   (DIR holds the files `stat` and `phase`)
'use strict';
const fs = require('fs');
const path = require('path');

const dir = process.argv[2];
const p = path.join(dir, 'stat');
const q = path.join(dir, 'phase');

function loopA() {
  for (let i = 0; i < 200; i++) fs.statSync(p); // @line A
}

function once() {
  return fs.accessSync(p); // @line X
}

function interleaved() {
  for (let i = 0; i < 20; i++) {
    fs.statSync(p); // @line B
    fs.lstatSync(p); // @line C
    fs.statSync(p); // @line D
  }
}

function phaseF() {
  for (let i = 0; i < 300; i++) fs.statSync(q); // @line F
}

function phaseE() {
  for (let i = 0; i < 300; i++) fs.statSync(q); // @line E
}

loopA();
once();
interleaved();
phaseF();
phaseE();
