import { writeSync } from 'node:fs';
import { stripControls } from '../core/text.js';

/** Where a command writes and what it reads from its surroundings; real process by default. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /**
   * A status line on stderr rewritten in place (`null` erases it): present only when stderr is a
   * terminal. Our own words and figures only — it is written past the control-character filter.
   */
  status?: ((line: string | null) => void) | undefined;
  /** Pass every later write through `scrub` (given by a command once it has opened its config). */
  useScrubber?: (scrub: (text: string) => string) => void;
}

/**
 * `io` whose every write passes through the scrubber a command gives it: commands print what engines
 * wrote (events, errors, acts), and nothing they print may carry a secret (SPEC invariant 3).
 */
export function scrubbingIo(io: Io): Io {
  let scrub = (text: string) => text;
  return derive(io, {
    out: (text) => io.out(scrub(text)),
    err: (text) => io.err(scrub(text)),
    useScrubber: (next) => {
      scrub = next;
    },
  });
}

/**
 * `io` with some members replaced. Copied as property descriptors, not spread: the process's
 * `status` is a getter (see processIo), read when a command shows progress, not when `io` is made.
 */
function derive(io: Io, members: Partial<Io>): Io {
  return Object.assign(Object.defineProperties({}, Object.getOwnPropertyDescriptors(io)) as Io, members);
}

/**
 * `io` that prints no control character from outside: every write loses its escape sequences (whole)
 * and its C0 (but newline and tab), DEL and C1 characters, so a payload's `action`, a title or an
 * engine's output cannot drive the terminal, in any command. Commands' `--json` output is already
 * escaped (`toJson`), so this changes nothing in it.
 */
export function showingIo(io: Io): Io {
  return derive(io, {
    out: (text) => io.out(stripControls(text)),
    err: (text) => io.err(stripControls(text)),
  });
}

type Write = (fd: number, bytes: Uint8Array, offset: number) => number;

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * All of `text` written to `fd` with blocking `write(2)` calls, without making Node's stream for it
 * (making stdout loads `stream`, stderr `net` or `tty`: ~4 ms of a command). The event loop waits
 * meanwhile — only commands that print their answer and end write this way (see `processIo`). A
 * descriptor left non-blocking is waited on (EAGAIN, backing off to 50 ms), a short write continued.
 * False when the reader is gone (EPIPE: `the-loop … | head`): nothing more can reach it.
 */
export function writeAll(fd: number, text: string, write: Write = writeSync): boolean {
  const bytes = Buffer.from(text, 'utf8');
  let at = 0;
  let wait = 1;
  while (at < bytes.length) {
    try {
      at += write(fd, bytes, at);
      wait = 1;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EPIPE') return false;
      if (code !== 'EAGAIN') throw error;
      Atomics.wait(pause, 0, 0, wait);
      wait = Math.min(wait * 2, 50);
    }
  }
  return true;
}

const statusLine = (line: string | null): void => {
  process.stderr.write(line === null ? '\r\x1b[K' : `\r${stripControls(line)}\x1b[K`);
};

/**
 * The process's io. `direct` (a command that prints its answer and ends): stdout and stderr are
 * written by `writeAll`, the streams never made; once a reader is gone, later writes to it are
 * dropped and the command still ends with its own exit code. Otherwise (a turn, a follow, the
 * daemon: the event loop must keep running while a slow reader catches up) Node's streams, which
 * queue what a pipe cannot take yet.
 */
export const processIo = (options: { direct?: boolean } = {}): Io => {
  const open = [true, true, true];
  const direct = (fd: 1 | 2) => (text: string) => {
    if (open[fd]) open[fd] = writeAll(fd, text);
  };
  const io = {
    out: options.direct ? direct(1) : (text: string) => process.stdout.write(text),
    err: options.direct ? direct(2) : (text: string) => process.stderr.write(text),
    cwd: process.cwd(),
    env: process.env,
  };
  // Asked when a scan shows progress, not at every start: Node makes process.stderr on first use.
  return Object.defineProperties(io, {
    status: { enumerable: true, get: () => (process.stderr.isTTY ? statusLine : undefined) },
  }) as Io;
};

/** Exit codes: 0 done; 1 the work failed (a failed turn, a missing binary); 2 bad input or config. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;
