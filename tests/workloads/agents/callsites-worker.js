// callsites-worker.js: a worker thread of callsites.js; its call runs on its own thread.
'use strict';
const fs = require('fs');
const { workerData } = require('worker_threads');

function workerSite(p) {
  return fs.existsSync(p); // @site worker workerSite
}
workerSite(workerData);
