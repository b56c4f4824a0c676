import { writeSync } from 'node:fs';
import { stripControls } from '../core/text.js';

/** Where a command writes and what it reads from its surroundings; real process by default. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /** Whether stdout is a terminal (colours, progress). */
  isTty: boolean;
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
 * All of `text` written to `fd`, synchronously, as Node writes stdout and stderr to files, pipes and
 * terminals on Linux — without making the streams (making stderr loads `net` or `tty`, stdout's
 * `stream`: ~4 ms of every command). A descriptor left non-blocking by the parent is waited on
 * (EAGAIN), a short write continued. A reader that closed the pipe (EPIPE: `the-loop … | head`)
 * ends the command quietly, with its exit code so far: that is the reader's choice, not an error.
 */
export function writeAll(fd: number, text: string, write: Write = writeSync): void {
  const bytes = Buffer.from(text, 'utf8');
  let at = 0;
  while (at < bytes.length) {
    try {
      at += write(fd, bytes, at);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') Atomics.wait(pause, 0, 0, 1);
      else if (code === 'EPIPE') process.exit(process.exitCode ?? 0);
      else throw error;
    }
  }
}

const statusLine = (line: string | null): void =>
  writeAll(2, line === null ? '\r\x1b[K' : `\r${stripControls(line)}\x1b[K`);

export const processIo = (): Io => {
  const io = {
    out: (text: string) => writeAll(1, text),
    err: (text: string) => writeAll(2, text),
    cwd: process.cwd(),
    env: process.env,
  };
  // Asked when used, not at every start: Node makes process.stdout and process.stderr on first
  // use (see writeAll). Only a scan's progress asks whether stderr is a terminal.
  return Object.defineProperties(io, {
    isTty: { enumerable: true, get: () => Boolean(process.stdout.isTTY) },
    status: { enumerable: true, get: () => (process.stderr.isTTY ? statusLine : undefined) },
  }) as Io;
};

/** Exit codes: 0 done; 1 the work failed (a failed turn, a missing binary); 2 bad input or config. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;
