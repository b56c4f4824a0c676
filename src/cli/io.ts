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
  return {
    ...io,
    out: (text) => io.out(scrub(text)),
    err: (text) => io.err(scrub(text)),
    useScrubber: (next) => {
      scrub = next;
    },
  };
}

/**
 * `io` that prints no control character from outside: every write loses its escape sequences (whole)
 * and its C0 (but newline and tab), DEL and C1 characters, so a payload's `action`, a title or an
 * engine's output cannot drive the terminal, in any command. Commands' `--json` output is already
 * escaped (`toJson`), so this changes nothing in it.
 */
export function showingIo(io: Io): Io {
  return { ...io, out: (text) => io.out(stripControls(text)), err: (text) => io.err(stripControls(text)) };
}

export const processIo = (): Io => ({
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
  isTty: Boolean(process.stdout.isTTY),
  status: process.stderr.isTTY
    ? (line) => process.stderr.write(line === null ? '\r\x1b[K' : `\r${stripControls(line)}\x1b[K`)
    : undefined,
});

/** Exit codes: 0 done; 1 the work failed (a failed turn, a missing binary); 2 bad input or config. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;
