/** Where a command writes and what it reads from its surroundings; real process by default. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /** Whether stdout is a terminal (colours, progress). */
  isTty: boolean;
}

export const processIo = (): Io => ({
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
  isTty: Boolean(process.stdout.isTTY),
});

/** Exit codes: 0 done; 1 the work failed (a failed turn, a missing binary); 2 bad input or config. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;
