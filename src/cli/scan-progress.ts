import type { Io } from './io.js';

/**
 * The progress line of `usage scan`, on stderr, once a scan has run for a few seconds (a short one
 * says nothing): on a terminal one line rewritten in place and erased at the end; elsewhere (a log,
 * a pipe) a plain line now and then, and none with `--json` (a script reads its stdout and may keep
 * its stderr). Never on stdout: the summary and `--json` stay as they are.
 */

/** A scan shorter than this shows no progress. */
const AFTER_MS = 3000;
/** On a terminal: rewritten at most this often. */
const TERMINAL_EVERY_MS = 250;
/** Elsewhere: a line this often at most. */
const PLAIN_EVERY_MS = 10_000;

/** `usage scan: 412.0 of 1,140.3 MB read (36%), 4.1 s` */
export function progressText(done: number, total: number, elapsedMs: number): string {
  const mb = (n: number) =>
    (n / 1e6).toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  const percent = total > 0 ? Math.min(100, Math.floor((done / total) * 100)) : 100;
  return `usage scan: ${mb(done)} of ${mb(total)} MB read (${percent}%), ${(elapsedMs / 1000).toFixed(1)} s`;
}

export class ScanProgress {
  private readonly started: number;
  private last = Number.NEGATIVE_INFINITY;
  private shown = false;

  constructor(
    private readonly io: Pick<Io, 'err' | 'status'>,
    private readonly options: { json?: boolean | undefined; now?: () => number } = {},
  ) {
    this.started = this.now();
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  /** Bytes read so far of the total (`scanTranscripts`' onProgress). */
  update(done: number, total: number): void {
    const elapsed = this.now() - this.started;
    if (elapsed < AFTER_MS) return;
    const { status } = this.io;
    if (status) {
      if (elapsed - this.last < TERMINAL_EVERY_MS) return;
      status(progressText(done, total, elapsed));
      this.shown = true;
    } else {
      if (this.options.json || elapsed - this.last < PLAIN_EVERY_MS) return;
      this.io.err(`${progressText(done, total, elapsed)}\n`);
    }
    this.last = elapsed;
  }

  /** The scan ended (or failed): the terminal's line is erased before anything else is printed. */
  end(): void {
    if (this.shown) this.io.status?.(null);
    this.shown = false;
  }
}
