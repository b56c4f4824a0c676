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

const statusLine = (line: string | null): void => {
  process.stderr.write(line === null ? '\r\x1b[K' : `\r${stripControls(line)}\x1b[K`);
};

export const processIo = (): Io => {
  const io: Io = {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    cwd: process.cwd(),
    env: process.env,
    isTty: Boolean(process.stdout.isTTY),
  };
  // Asked when a command shows progress, not at every start: Node makes process.stderr on first
  // use, and making it loads `net` (a pipe) or `tty` (a terminal) — ~3 ms of every command.
  return Object.defineProperty(io, 'status', {
    enumerable: true,
    get: () => (process.stderr.isTTY ? statusLine : undefined),
  });
};

/** Exit codes: 0 done; 1 the work failed (a failed turn, a missing binary); 2 bad input or config. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;
