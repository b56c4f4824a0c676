import { type ScannedJob, type ScannedRecord, type ScanResult, scanFile } from './scan-file.js';

/**
 * How the threads of `usage scan` share the files: one list, largest first, and a counter in shared
 * memory that each thread advances to claim the next file (`Atomics.add`: no file read twice, none
 * missed, no message round trip). A thread claims a file when it is free — this one only when no
 * piece waits to be written — so the threads stay busy to the end whatever the mix: when the rows
 * are many (inserting them is this thread's work), the workers read nearly everything; when they
 * are few, this thread reads its part too. Largest first: the last files claimed are small, and no
 * thread is left reading a large one alone.
 */

/** Slots of the shared counters. */
const NEXT = 0;
const UNWRITTEN = 1;

/** The files in the order they are claimed, and the shared counters (one buffer, for the workers too). */
export class JobQueue {
  readonly jobs: ScannedJob[];
  private readonly counters: Int32Array;

  /** A new queue over `jobs` (`shared`: absent), or a worker's view of one (its jobs and buffer). */
  constructor(jobs: readonly ScannedJob[], shared?: SharedArrayBuffer) {
    this.jobs = shared
      ? (jobs as ScannedJob[])
      : [...jobs]
          .sort((a, b) => b.bytes - a.bytes)
          .map(({ path, offset, inode, bytes }) => ({ path, offset, inode, bytes }));
    this.counters = new Int32Array(shared ?? new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));
  }

  get buffer(): SharedArrayBuffer {
    return this.counters.buffer as SharedArrayBuffer;
  }

  /** The next file nobody has claimed, or undefined when all are. */
  claim(): ScannedJob | undefined {
    return this.jobs[Atomics.add(this.counters, NEXT, 1)];
  }

  /**
   * A worker with a piece to send waits while `limit` pieces (of all the workers) are not written
   * yet: the rows found ahead of the writer are not all held in memory at once (blocking: workers
   * only).
   */
  waitForRoom(limit: number): void {
    for (;;) {
      const now = Atomics.load(this.counters, UNWRITTEN);
      if (now < limit) break;
      Atomics.wait(this.counters, UNWRITTEN, now, 1000);
    }
    Atomics.add(this.counters, UNWRITTEN, 1);
  }

  /** The scan failed: no worker waits for room any more (they are being stopped). */
  release(): void {
    Atomics.store(this.counters, UNWRITTEN, -(2 ** 30));
    Atomics.notify(this.counters, UNWRITTEN);
  }

  /** A worker's piece was written (this thread): a waiting worker may send its next one. */
  written(): void {
    Atomics.sub(this.counters, UNWRITTEN, 1);
    Atomics.notify(this.counters, UNWRITTEN);
  }
}

/**
 * The results of the files one thread scans, gathered into a piece: one key map for the piece, so
 * copies of a request within it are folded here already (a request whose copies fall into two
 * pieces is sent twice; the writer keeps one row, with the larger output count).
 */
export class PieceScanner {
  private seen = new Map<string, ScannedRecord>();
  private results: ScanResult[] = [];
  /** Bytes of the files scanned into this piece so far. */
  bytes = 0;

  constructor(private readonly metered: ReadonlySet<string>) {}

  get empty(): boolean {
    return this.results.length === 0;
  }

  /** Scan one file into the piece; an unreadable file is reported in it, not fatal. */
  add(job: ScannedJob): void {
    try {
      this.results.push({ path: job.path, scan: scanFile(job.path, job, this.seen, this.metered) });
    } catch (error) {
      this.results.push({ path: job.path, error: (error as NodeJS.ErrnoException).code ?? String(error) });
    }
    this.bytes += job.bytes;
  }

  /** The piece so far; the next one starts empty. */
  take(): ScanResult[] {
    const piece = this.results;
    this.results = [];
    this.seen = new Map();
    this.bytes = 0;
    return piece;
  }
}
