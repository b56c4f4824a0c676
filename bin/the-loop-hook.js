#!/usr/bin/env node
// the-loop's Claude Code command hook: `the-loop-hook.js <events-file>`.
//
// Claude Code runs this (through `/bin/sh -c`, see src/runners/tmux/claude-hooks.ts) for every hook
// event in the generated `--settings` file, with the event's JSON on stdin. It appends exactly one line
// to the per-session events file the daemon tails:
//
//   {"v":1,"receivedAt":"<iso>","event":"<hook_event_name>","sessionId":"<session_id>","payload":{…KEPT}}
//
// Rules it keeps (SPEC invariants 1, 3, 7):
// - One `writeSync` on a file opened for append (O_APPEND, 0600, no symlink follow), so hooks running
//   at the same time never interleave their lines (the kernel positions and writes an O_APPEND write
//   to a regular file as one unit).
// - Exit 0 and print nothing on stdout, whatever happens: for these events a non-zero exit or stdout
//   text would change what Claude does (stdout of SessionStart/UserPromptSubmit becomes model context;
//   exit 2 of PreToolUse blocks the tool). Problems go to stderr, which Claude only shows in debug mode.
// - Never reads or records the environment: Claude passes its whole environment (credentials
//   included) to hook processes. Invalid stdin is recorded by its size only, never its text.
// - Records only the payload fields the daemon reads (KEPT), each of the shape it expects: ids, paths,
//   one-word values, flags. Free text — the prompt, `last_assistant_message`, tool input and output —
//   is never written. This process runs in the engine's process tree and knows no secret to mask
//   (it must not), so a model that echoes a key must find no field here to leave it in.
// - No dependencies and no build step: this file runs as-is from the package.
//
// Later, PreToolUse policy decisions (issue 6) hook in after `record()`: the attempt is appended first
// (so it is on record even if the decision cannot be made), then a decision is asked for and a denial
// is reported by exit code 2 with the reason on stderr (Claude's documented blocking contract).
const { closeSync, constants, openSync, writeSync } = require('node:fs');
const { isAbsolute } = require('node:path');

/** Hook payloads above this are not parsed: a truncated marker is recorded instead. */
const MAX_STDIN_BYTES = 8 * 1024 * 1024;
/** Keys read from the first bytes of an oversized payload, so a huge Stop still ends its turn. */
const EVENT_NAME = /"hook_event_name"\s*:\s*"([A-Za-z]{1,64})"/;
const SESSION_ID = /"session_id"\s*:\s*"([A-Za-z0-9._:-]{1,128})"/;

function fail(message) {
  process.stderr.write(`the-loop-hook: ${message}\n`);
  process.exitCode = 0;
}

/** The events file from argv: absolute, one line, no NUL. */
function eventsFileFromArgs(argv) {
  const file = argv[2];
  if (argv.length !== 3 || typeof file !== 'string') return undefined;
  if (!isAbsolute(file) || /[\n\r\0]/.test(file)) return undefined;
  return file;
}

/** Read stdin, keeping at most MAX_STDIN_BYTES + 1 bytes but draining (and counting) the rest. */
function readStdin() {
  return new Promise((resolve) => {
    const chunks = [];
    let kept = 0;
    let total = 0;
    const done = () => resolve({ data: Buffer.concat(chunks, kept), total });
    process.stdin.on('data', (chunk) => {
      total += chunk.length;
      const room = MAX_STDIN_BYTES + 1 - kept;
      if (room <= 0) return;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      chunks.push(part);
      kept += part.length;
    });
    process.stdin.on('end', done);
    process.stdin.on('error', done);
  });
}

const ID = /^[A-Za-z0-9._:@+-]{1,200}$/;
const WORD = /^[A-Za-z0-9._-]{1,64}$/;
const PATH = /^\/[^\0\n\r]{0,4095}$/;
/** What Claude Code says while a permission prompt is up ("Claude needs your permission"): one line. */
const NOTE = /^[^\0-\x1f\x7f]{1,200}$/;

/**
 * The payload fields the daemon reads (src/runners/tmux/claude-hook-events.ts), with the shape each
 * must have to be kept; a field of another shape is dropped. `message` is kept for Notification only.
 */
const KEPT = {
  hook_event_name: WORD,
  session_id: ID,
  transcript_path: PATH,
  cwd: PATH,
  source: WORD,
  reason: WORD,
  error: WORD,
  prompt_id: ID,
  permission_mode: WORD,
  notification_type: WORD,
  tool_name: ID,
  tool_use_id: ID,
  stop_hook_active: 'boolean',
};

/** The payload cut down to KEPT fields of the expected shapes. */
function keptFields(payload) {
  const kept = {};
  for (const [key, shape] of Object.entries(KEPT)) {
    const value = payload[key];
    if (shape === 'boolean' ? typeof value === 'boolean' : typeof value === 'string' && shape.test(value)) {
      kept[key] = value;
    }
  }
  if (payload.hook_event_name === 'Notification' && typeof payload.message === 'string') {
    if (NOTE.test(payload.message)) kept.message = payload.message;
  }
  return kept;
}

/** The record for what arrived on stdin. */
function toRecord(data, total, receivedAt) {
  if (total > MAX_STDIN_BYTES) {
    // Unparsed: only the two identifying keys are taken, by a pattern that cannot match inside a JSON
    // string (quotes there are escaped), so a Stop with a huge last message still ends its turn.
    const head = data.toString('utf8');
    const event = EVENT_NAME.exec(head)?.[1];
    const sessionId = SESSION_ID.exec(head)?.[1];
    return { v: 1, receivedAt, event: event ?? 'truncated', sessionId, truncated: true, bytes: total };
  }
  let payload;
  try {
    payload = JSON.parse(data.toString('utf8'));
  } catch {
    return { v: 1, receivedAt, event: 'invalid', bytes: total };
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    return { v: 1, receivedAt, event: 'invalid', bytes: total };
  }
  const kept = keptFields(payload);
  return {
    v: 1,
    receivedAt,
    event: kept.hook_event_name ?? 'unknown',
    sessionId: kept.session_id,
    payload: kept,
  };
}

/** Append one line with one write; O_NOFOLLOW: the events dir is ours, a symlink in it is not. */
function record(file, value) {
  const line = Buffer.from(`${JSON.stringify(value)}\n`, 'utf8');
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW;
  const fd = openSync(file, flags, 0o600);
  try {
    let written = writeSync(fd, line);
    // A short write on a regular file means the disk is full or a signal hit; finish the line anyway
    // so the next record does not get glued to a fragment.
    while (written > 0 && written < line.length) {
      written += writeSync(fd, line, written);
    }
  } finally {
    closeSync(fd);
  }
}

async function main() {
  const file = eventsFileFromArgs(process.argv);
  const receivedAt = new Date().toISOString();
  const { data, total } = await readStdin();
  if (file === undefined) {
    fail('usage: the-loop-hook.js <absolute events file path>');
    return;
  }
  try {
    record(file, toRecord(data, total, receivedAt));
  } catch (error) {
    fail(`cannot append to the events file: ${error instanceof Error ? error.message : String(error)}`);
  }
}

main().then(
  () => {
    process.exitCode = 0;
  },
  (error) => {
    fail(`unexpected error: ${error instanceof Error ? error.message : String(error)}`);
  },
);
