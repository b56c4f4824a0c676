#!/usr/bin/env node
// Thin launcher: the CLI is bundled into dist/cli.cjs (and its reading commands into
// dist/cli-read.cjs) by `npm run build` (run on `npm ci` by the
// prepare script, and by `npm start` / `npm test`), loaded with its code cache by ./cli-load.js.
// `serve`, and any command with THE_LOOP_UNBUNDLED=1, runs tsc's dist/ instead (readable stack traces).
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const {
  BUNDLE,
  DIST,
  READ_BUNDLE,
  UNBUNDLED,
  VENDOR,
  commandGroup,
  loadCli,
  readsOnly,
} = require('./cli-load.js');

// `the-loop sessions logs … | head` closes the pipe early: that is the reader's choice, not an error.
const onStreamError = (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
};
/**
 * stdout and stderr as they are made: Node makes each on first use, and making stderr loads `net`
 * (a pipe) or `tty` (a terminal) — ~3 ms of a command that never writes to it. Each gets its
 * handler when it is made, and only those made are flushed at exit.
 */
const madeStreams = [];
for (const name of ['stdout', 'stderr']) {
  const made = Object.getOwnPropertyDescriptor(process, name);
  if (!made || typeof made.get !== 'function' || !made.configurable) {
    process[name].on('error', onStreamError);
    madeStreams.push(process[name]);
    continue;
  }
  let stream;
  Object.defineProperty(process, name, {
    configurable: true,
    enumerable: made.enumerable,
    get() {
      if (stream === undefined) {
        stream = made.get.call(process);
        stream.on('error', onStreamError);
        madeStreams.push(stream);
      }
      return stream;
    },
  });
}

async function cli() {
  const group = commandGroup(process.argv);
  if (process.env.THE_LOOP_UNBUNDLED === '1' || UNBUNDLED.includes(group))
    return import('../dist/cli/main.js');
  // The reading commands run from the read bundle (bin/cli-load.js readsOnly).
  const read = readsOnly(process.argv);
  const missing = [
    read ? READ_BUNDLE : BUNDLE,
    ...Object.values(VENDOR).map((file) => join(DIST, file)),
  ].find((file) => !existsSync(file));
  if (missing) {
    process.stderr.write(
      `the-loop: ${missing} is missing: run \`npm run build\` in the-loop's directory first\n`,
    );
    process.exit(70);
  }
  return loadCli(group, { read }).exports;
}

/** Resolves once everything written to the stream so far is written (or the stream is gone). */
const flushed = (stream) =>
  new Promise((resolve) => {
    if (stream.destroyed || stream.writableLength === 0) resolve();
    else stream.write('', () => resolve());
  });

/**
 * The command is done: exit once stdout and stderr are written, instead of letting Node tear its
 * heap down first (30-45 ms on this kind of machine, paid by every command). Every command awaits
 * its own work (the log writes synchronously; the registry is closed by then). A probe the guard
 * started for a turn that was refused (bwrap --version) is left to end on its own.
 */
const exit = (code) => {
  process.exitCode = code;
  // The daemon and the connector's stdio server end as Node ends them: a request still in flight
  // when their input closes is answered.
  if (UNBUNDLED.includes(commandGroup(process.argv))) return;
  Promise.all(madeStreams.map(flushed)).then(() => process.exit(code));
};

cli()
  .then(({ main }) => main(process.argv))
  .then(exit, (error) => {
    process.stderr.write(
      `the-loop: unexpected error: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    exit(70);
  });
