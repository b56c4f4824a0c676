import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import type { ScanCursorStore } from '../core/ports/ledger.js';
import type { SessionStore } from '../core/ports/sessions.js';
import type { Ledger } from './ledger.js';
import { type ScanResult, scanFiles } from './scan-file.js';
import { emptySummary, type ScanSummary, TranscriptImport } from './scan-import.js';
import { changedFiles, listFiles, meteredPerTurn, ownSessions } from './scan-jobs.js';
import { scanInWorkers } from './scan-threads.js';

export type { ScanSummary } from './scan-import.js';
export { defaultTranscriptDirs } from './scan-jobs.js';

/**
 * `the-loop usage scan`: imports Claude Code's transcript history into the usage ledger,
 * incrementally. Each file is read from where the last scan stopped (kept in `scan_files`); a file
 * that shrank or was replaced is read again from the start, and the ledger's unique (meter, source id)
 * key makes re-reading harmless. Work is spread over worker threads (one per core) when there is
 * enough of it. Requests of sessions this installation already meters from their result events
 * (process-runner Claude sessions) are skipped: they are in the ledger once, per turn.
 */

/** About the longest the import keeps the database's write lock (plus one piece's scan) before it commits. */
const COMMIT_EVERY_MS = 1000;
/**
 * Results are handed over (and inserted) in pieces of about this many bytes of files. Small enough
 * that what is left to insert once the last file is read is little (~2,800 requests of a dense
 * history: a worker is at most a piece ahead of the writer), large enough that messages are few.
 */
const PIECE_BYTES = 16 * 1024 * 1024;
/** Below this much to read, threads cost more than they save. */
const THREAD_THRESHOLD_BYTES = 32 * 1024 * 1024;

/** What a scan reads and writes: the ledger, the scan cursors, this installation's sessions. */
export interface ScanDeps {
  ledger: Ledger;
  cursors: ScanCursorStore;
  sessions: Pick<SessionStore, 'engineSessions'>;
}

export async function scanTranscripts(
  deps: ScanDeps,
  dirsIn: readonly string[],
  options: {
    workers?: number;
    /** Bytes read so far of the total to read, after each piece is written (not called per file). */
    onProgress?: (done: number, total: number) => void;
    /** These files instead of every `.jsonl` under the dirs (the daemon's watcher: those that changed). */
    files?: readonly string[];
    /** Tuning (tests): below this many bytes to read, no worker threads; pieces handed over. */
    threadThresholdBytes?: number;
    pieceBytes?: number;
  } = {},
): Promise<ScanSummary> {
  const started = Date.now();
  const dirs = dirsIn.map((d) => resolve(d));
  const files = options.files ?? listFiles(dirs);
  const jobs = changedFiles(await deps.cursors.all(), files);
  // Requests of our own sessions: attributed to them; those metered per turn are not added again.
  const sessions = ownSessions(await deps.sessions.engineSessions());
  const metered = meteredPerTurn(sessions);
  const total = jobs.reduce((n, j) => n + j.bytes, 0);
  const threads =
    total < (options.threadThresholdBytes ?? THREAD_THRESHOLD_BYTES)
      ? 0
      : Math.max(1, Math.min(options.workers ?? availableParallelism(), jobs.length));
  const summary = emptySummary(dirs, files.length, threads);
  const writes = await deps.ledger.store.beginImport({ commitEveryMs: COMMIT_EVERY_MS });
  const imported = new TranscriptImport(writes, (w) => deps.ledger.pricer(w), sessions, jobs, summary);
  // Pieces are written one after another, in the order they come (a worker's arrive as messages).
  let queue: Promise<void> = Promise.resolve();
  const bytesOf = new Map(jobs.map((j) => [j.path, j.bytes]));
  let done = 0;
  const take = (results: readonly ScanResult[]): Promise<void> => {
    queue = queue.then(async () => {
      await imported.take(results);
      await writes.commit(false);
      for (const r of results) done += bytesOf.get(r.path) ?? 0;
      options.onProgress?.(done, total);
    });
    return queue;
  };
  try {
    if (threads === 0) await take(scanFiles(jobs, metered));
    else
      await scanInWorkers(jobs, threads, metered, take, options.pieceBytes ?? PIECE_BYTES, (waiting) =>
        queue.then(() => writes.commit(waiting)),
      );
    await queue;
    await writes.finish();
  } finally {
    await writes.abort();
  }
  // The size is what the file had when read: an unchanged file is not opened next time, and a
  // partial last line (the offset stops before it) is read once the file grows. Saved only once
  // every thread is done: a failed scan reads the same bytes again next time (adding nothing twice).
  await deps.cursors.save(
    imported.cursors.map(({ path, scan }) => ({
      path,
      inode: scan.inode,
      size: scan.size,
      offset: scan.offset,
    })),
    new Date().toISOString(),
  );
  summary.duplicates = summary.records - summary.alreadyMetered - summary.added - summary.copies;
  summary.ms = Date.now() - started;
  return summary;
}
