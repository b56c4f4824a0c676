import { Worker } from 'node:worker_threads';
import { describeError, LoopError } from '../core/errors.js';
import type { ScanJob, ScanResult } from './scan-file.js';
import { JobQueue, PieceScanner } from './scan-share.js';

/**
 * Pieces a worker may have sent and not yet seen written before it waits: one (it scans its next
 * piece meanwhile, so the writer seldom waits), which keeps what is left to write once the last
 * file is read to about a piece, and the rows found ahead of the writer few.
 */
const IN_FLIGHT = 1;

/** A worker thread claiming files from `queue`, its pieces handed to `take`; settled on every exit. */
function startWorker(
  queue: JobQueue,
  metered: ReadonlySet<string>,
  pieceBytes: number,
  take: (results: readonly ScanResult[]) => Promise<void>,
  workers: Worker[],
): Promise<void> {
  const url = new URL('./scan-worker.js', import.meta.url);
  return new Promise<void>((resolvePart, reject) => {
    const worker = new Worker(url, {
      workerData: {
        jobs: queue.jobs,
        shared: queue.buffer,
        metered: [...metered],
        pieceBytes,
        inFlight: IN_FLIGHT,
      },
      // It allocates little that lives: a small young generation keeps its heap small
      // (5 MB less peak memory on the bench corpus, no slower).
      resourceLimits: { maxYoungGenerationSizeMb: 8 },
    });
    workers.push(worker);
    let done = false;
    worker.on('message', (m: { piece: ScanResult[] } | { done: true }) => {
      // Written in the order they come (take queues them); a failed write fails the scan.
      if ('piece' in m) take(m.piece).then(() => queue.written(), reject);
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
 * Scan the files with this thread and `n - 1` worker threads, sharing them as they go (see
 * scan-share.ts). Every thread hands its results over in pieces of about `pieceBytes`, and this
 * thread writes each piece as it comes: writing comes first — it claims a file only when no piece
 * waits — so little is left to write when the last file is read.
 */
export async function scanInWorkers(
  jobs: ReadonlyArray<ScanJob & { bytes: number }>,
  n: number,
  metered: ReadonlySet<string>,
  take: (results: readonly ScanResult[]) => Promise<void>,
  pieceBytes: number,
  /**
   * Called before this thread scans a file (commit if the lock was held long enough) and before it
   * only waits (commit): the write lock is never held much longer than the batch interval.
   */
  pause: (waiting: boolean) => Promise<void>,
): Promise<void> {
  const queue = new JobQueue(jobs);
  const workers: Worker[] = [];
  // Pieces taken and not yet written, and the last one's promise (take queues them in order).
  let waiting = 0;
  let last: Promise<void> = Promise.resolve();
  const taken = (results: readonly ScanResult[]): Promise<void> => {
    waiting += 1;
    last = take(results).finally(() => {
      waiting -= 1;
    });
    return last;
  };
  try {
    const started = Array.from({ length: Math.max(0, n - 1) }, () =>
      startWorker(queue, metered, pieceBytes, taken, workers),
    );
    let failed: unknown;
    for (const p of started) p.catch((error: unknown) => (failed ??= error));
    const own = new PieceScanner(metered);
    for (;;) {
      if (failed !== undefined) throw failed;
      if (waiting > 0) {
        // A failed write is the scan's failure: it reaches `failed` or this thread's own await.
        await last.catch(() => undefined);
        continue;
      }
      const job = queue.claim();
      if (job === undefined) break;
      await pause(false);
      own.add(job);
      if (own.bytes >= pieceBytes) await taken(own.take());
      // Let the workers' pieces in (their messages are taken between two files of this thread).
      await new Promise<void>((resolveTurn) => setImmediate(resolveTurn));
    }
    if (!own.empty) await taken(own.take());
    await pause(true);
    await Promise.all(started);
    // The last pieces the workers sent, written (a failure there is the scan's too).
    await pause(true);
  } catch (cause) {
    // One thread failed: the others' work is wasted anyway; stop them instead of waiting.
    queue.release();
    await Promise.all(workers.map((w) => w.terminate()));
    throw new LoopError('internal', `the transcript scan failed: ${describeError(cause)}`, {
      cause,
      hint: 'Run it again (--workers 1 scans in one thread): its files are read again, and what this scan added is not added twice.',
    });
  }
}
