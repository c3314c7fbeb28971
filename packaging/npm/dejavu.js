#!/usr/bin/env node
// @ts-check
/**
 * The `dejavu` command of the npm package dejavu-profiler: runs the dejavu binary of the
 * platform package npm installed beside it (@dejavu-profiler/linux-x64, an optional
 * dependency selected by its os and cpu fields, as esbuild ships its binaries), with the
 * same arguments, standard streams and exit status. docs/install.md.
 *
 * Signals: Ctrl-C and the terminal's other signals reach dejavu directly (it is in the
 * same process group); this launcher ignores them and waits for dejavu to finish its
 * report. SIGTERM and SIGHUP sent to the launcher alone are passed on to dejavu. When
 * dejavu dies of a signal, the launcher dies of the same one, so a shell sees what it
 * would have seen without the launcher.
 */
'use strict';

const { spawn } = require('child_process');
const path = require('path');

/** The platform packages this release has, by `${process.platform}-${process.arch}`. */
const PLATFORMS = { 'linux-x64': '@dejavu-profiler/linux-x64' };

function binary() {
  const key = `${process.platform}-${process.arch}`;
  const pkg = PLATFORMS[/** @type {keyof typeof PLATFORMS} */ (key)];
  if (pkg === undefined) {
    process.stderr.write(
      `dejavu: no dejavu binary for ${key}: this release has ${Object.keys(PLATFORMS).join(', ')} ` +
        '(dejavu records Linux programs; on another platform, run it inside a Linux VM or container)\n',
    );
    process.exit(1);
  }
  try {
    return require.resolve(`${pkg}/bin/dejavu`);
  } catch {
    process.stderr.write(
      `dejavu: the package ${pkg}, which holds the dejavu binary for ${key}, is not installed.\n` +
        'npm installs it as an optional dependency of dejavu-profiler; it is missing when npm ran with ' +
        '--no-optional / --omit=optional, or when node_modules was copied from another platform. ' +
        `Install it: npm install ${pkg}@${require(path.join(__dirname, '..', 'package.json')).version}\n`,
    );
    process.exit(1);
  }
}

const child = spawn(binary(), process.argv.slice(2), { stdio: 'inherit' });
const ignore = () => {};
const forward = (/** @type {NodeJS.Signals} */ sig) => {
  try {
    child.kill(sig);
  } catch {
    // already gone
  }
};
// The terminal sends these to the whole foreground group: dejavu gets its own copy.
for (const sig of /** @type {NodeJS.Signals[]} */ (['SIGINT', 'SIGQUIT'])) process.on(sig, ignore);
// Sent to the launcher alone (kill PID, a closed terminal): pass them on.
for (const sig of /** @type {NodeJS.Signals[]} */ (['SIGTERM', 'SIGHUP', 'SIGUSR1', 'SIGUSR2'])) process.on(sig, forward);
child.on('error', (e) => {
  process.stderr.write(`dejavu: could not run ${e && /** @type {any} */ (e).path}: ${e.message}\n`);
  process.exit(125);
});
child.on('exit', (code, signal) => {
  if (signal !== null) {
    for (const s of ['SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGHUP', 'SIGUSR1', 'SIGUSR2']) process.removeAllListeners(s);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});
