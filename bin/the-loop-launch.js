#!/usr/bin/env node
// Starts an engine inside tmux without putting its environment anywhere visible: tmux runs
// `node the-loop-launch.js <env-file> <binary> <args…>`; this reads the engine's environment from
// the 0600 file the daemon wrote, deletes the file, then runs the engine with that environment (and
// nothing else), attached to the pane's terminal. Its exit status is the engine's.
const { spawn } = require('node:child_process');
const { readFileSync, unlinkSync } = require('node:fs');

const argv = process.argv.slice(2);
// `--sandboxed`: the binary is bwrap, which forwards no signal and SIGKILLs its sandbox when it
// dies; signals go to the processes inside instead, so the engine can stop cleanly.
const sandboxed = argv[1] === '--sandboxed';
const [envFile, binary, ...args] = sandboxed ? [argv[0], ...argv.slice(2)] : argv;
if (!envFile || !binary) {
  process.stderr.write(
    'the-loop-launch: usage: the-loop-launch.js <env-file> [--sandboxed] <binary> [args…]\n',
  );
  process.exit(64);
}
let env;
try {
  env = JSON.parse(readFileSync(envFile, 'utf8'));
} catch (error) {
  process.stderr.write(`the-loop-launch: cannot read the engine environment: ${error.code ?? 'invalid'}\n`);
  process.exit(66);
} finally {
  try {
    unlinkSync(envFile);
  } catch {
    // Already gone.
  }
}
const child = spawn(binary, args, { stdio: 'inherit', env });
const forward = sandboxed
  ? async (signal) => {
      const { signalSandboxed } = await import('../dist/sandbox/signal.js');
      if (child.pid === undefined || signalSandboxed(child.pid, signal) === 0) child.kill(signal);
    }
  : (signal) => child.kill(signal);
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => void forward(signal));
child.on('error', (error) => {
  process.stderr.write(`the-loop-launch: cannot start ${binary}: ${error.code ?? error.message}\n`);
  process.exit(127);
});
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
