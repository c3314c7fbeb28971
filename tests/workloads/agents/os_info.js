// os_info.js: what the system is made of, asked synchronously again and again: os.cpus()
// (/proc/cpuinfo and /proc/stat), process.report.getReport() (detect-libc's glibc check:
// /proc/self/stat and more), os.totalmem() (/proc/meminfo). The agent wraps them: their
// reads name these lines (crates/dejavu/tests/agent_gaps.rs,
// node_system_information_reads_name_their_line).
//
// usage: node os_info.js
'use strict';

const os = require('os');

function parallelism() {
  return os.cpus().length; // @site cpus parallelism
}

function glibc() {
  return process.report.getReport().header.glibcVersionRuntime; // @site report glibc
}

function memory() {
  return os.totalmem(); // @site totalmem memory
}

let n = 0;
for (let i = 0; i < 5; i++) n += parallelism();
for (let i = 0; i < 3; i++) n += String(glibc()).length;
for (let i = 0; i < 5; i++) n += memory() > 0 ? 1 : 0;
process.stdout.write(`os_info.js: ${n}\n`);
