import { Worker } from 'node:worker_threads';
import { describeError, LoopError } from '../core/errors.js';
import { pieces, type ScanJob, type ScannedJob, type ScanResult, scanFiles } from './scan-file.js';

/**
 * This thread's share of the bytes against a worker's (1): it also inserts every row, which costs
 * it about as much as scanning half the bytes (measured on the bench corpus, two threads).
 */
const OWN_SHARE_WEIGHT = 0.3;

type Share = { load: number; weight: number; jobs: ScannedJob[] };

/** Largest file first onto the least loaded thread; this thread's share is weighted down. */
function shareOut(jobs: ReadonlyArray<ScanJob & { bytes: number }>, n: number): Share[] {
  const shares: Share[] = Array.from({ length: n }, (_, i) => ({
    load: 0,
    weight: i === 0 ? OWN_SHARE_WEIGHT : 1,
    jobs: [],
  }));
  for (const job of [...jobs].sort((a, b) => b.bytes - a.bytes)) {
    const share = shares.reduce((min, s) => (s.load < min.load ? s : min));
    share.load += job.bytes / share.weight;
    share.jobs.push({ path: job.path, offset: job.offset, inode: job.inode, bytes: job.bytes });
  }
  return shares;
}

/** A worker thread scanning one share, its pieces handed to `take`; settled on every exit. */
function startWorker(
  share: Share,
  metered: ReadonlySet<string>,
  pieceBytes: number,
  take: (results: readonly ScanResult[]) => Promise<void>,
  workers: Worker[],
): Promise<void> {
  const url = new URL('./scan-worker.js', import.meta.url);
  return new Promise<void>((resolvePart, reject) => {
    const worker = new Worker(url, {
      workerData: { jobs: share.jobs, metered: [...metered], pieceBytes },
      // It allocates little that lives: a small young generation keeps its heap small
      // (5 MB less peak memory on the bench corpus, no slower).
      resourceLimits: { maxYoungGenerationSizeMb: 8 },
    });
    workers.push(worker);
    let done = false;
    worker.on('message', (m: { piece: ScanResult[] } | { done: true }) => {
      // Written in the order they come (take queues them); a failed write fails the scan.
      if ('piece' in m) take(m.piece).catch(reject);
      else done = true;
    });
    worker.once('error', reject);
    // A worker that ends without saying it is done is an error too.
    worker.once('exit', (code) =>
      done ? resolvePart() : reject(new Error(`a scan thread exited (code ${code}) before it was done`)),
    );
  });
}

/**
 * Spread the files over `n` threads by size: this thread scans the first share itself while
 * `n - 1` worker threads scan the others. Every thread hands its results over in pieces of about
 * `pieceBytes`, and this thread inserts each piece as it comes — between pieces of its own share,
 * and while the others still scan — so little is left to insert when the last thread ends.
 * Inserting is this thread's work: its share is smaller by that much.
 */
export async function scanInWorkers(
  jobs: ReadonlyArray<ScanJob & { bytes: number }>,
  n: number,
  metered: ReadonlySet<string>,
  take: (results: readonly ScanResult[]) => Promise<void>,
  pieceBytes: number,
  /**
   * Called before this thread scans a piece (commit if the lock was held long enough) and before it
   * only waits (commit): the write lock is never held much longer than the batch interval.
   */
  pause: (waiting: boolean) => Promise<void>,
): Promise<void> {
  const [own, ...others] = shareOut(jobs, n);
  const workers: Worker[] = [];
  try {
    const started = others
      .filter((s) => s.jobs.length > 0)
      .map((share) => startWorker(share, metered, pieceBytes, take, workers));
    let failed: unknown;
    for (const p of started) p.catch((error: unknown) => (failed ??= error));
    for (const piece of pieces(own?.jobs ?? [], pieceBytes)) {
      if (failed !== undefined) throw failed;
      await pause(false);
      await take(scanFiles(piece, metered));
      // Let the other threads' pieces in (their messages are taken between two of ours).
      await new Promise<void>((resolveTurn) => setImmediate(resolveTurn));
    }
    await pause(true);
    await Promise.all(started);
    // The last pieces the workers sent, written (a failure there is the scan's too).
    await pause(true);
  } catch (cause) {
    // One thread failed: the others' work is wasted anyway; stop them instead of waiting.
    await Promise.all(workers.map((w) => w.terminate()));
    throw new LoopError('internal', `the transcript scan failed: ${describeError(cause)}`, {
      cause,
      hint: 'Run it again (--workers 1 scans in one thread): its files are read again, and what this scan added is not added twice.',
    });
  }
}
