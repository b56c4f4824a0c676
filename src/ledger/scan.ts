import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import type { Db } from '../store/db.js';
import type { Ledger } from './ledger.js';
import { scanFiles } from './scan-file.js';
import { emptySummary, type ScanSummary, TranscriptImport } from './scan-import.js';
import { changedFiles, listFiles, meteredPerTurn, ownSessions, saveCursors } from './scan-jobs.js';
import { batchedWrites, scanInWorkers } from './scan-threads.js';

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
/** Results are handed over (and inserted) in pieces of about this many bytes of files. */
const PIECE_BYTES = 48 * 1024 * 1024;
/** Below this much to read, threads cost more than they save. */
const THREAD_THRESHOLD_BYTES = 32 * 1024 * 1024;

export async function scanTranscripts(
  db: Db,
  ledger: Ledger,
  dirsIn: readonly string[],
  options: {
    workers?: number;
    onProgress?: (done: number, total: number) => void;
    /** Tuning (tests): below this many bytes to read, no worker threads; pieces handed over. */
    threadThresholdBytes?: number;
    pieceBytes?: number;
  } = {},
): Promise<ScanSummary> {
  const started = Date.now();
  const dirs = dirsIn.map((d) => resolve(d));
  const files = listFiles(dirs);
  const jobs = changedFiles(db, files);
  // Requests of our own sessions: attributed to them; those metered per turn are not added again.
  const sessions = ownSessions(db);
  const metered = meteredPerTurn(sessions);
  const total = jobs.reduce((n, j) => n + j.bytes, 0);
  const threads =
    total < (options.threadThresholdBytes ?? THREAD_THRESHOLD_BYTES)
      ? 0
      : Math.max(1, Math.min(options.workers ?? availableParallelism(), jobs.length));
  const summary = emptySummary(dirs, files.length, threads);
  const imported = new TranscriptImport(db, ledger, sessions, jobs, summary);
  const writes = batchedWrites(db, COMMIT_EVERY_MS);
  const take: Parameters<typeof scanInWorkers>[3] = (results) => {
    writes.begin();
    imported.take(results);
    writes.commitIfDue();
  };
  // For the import, on this connection: a smaller page cache than its default (16 MB) — the rows are
  // written once, and what the cache would hold is the import's own pages; and no fsync at each
  // piece's commit (WAL, synchronous NORMAL) — imported rows can always be read again from the
  // transcripts, and the cursors that say they were read are committed last, with an fsync.
  const cacheSize = db.pragma('cache_size', { simple: true }) as number;
  const synchronous = db.pragma('synchronous', { simple: true }) as number;
  db.pragma('cache_size = -4000');
  db.pragma('synchronous = NORMAL');
  try {
    if (threads === 0) take(scanFiles(jobs, metered));
    else
      await scanInWorkers(jobs, threads, metered, take, options.pieceBytes ?? PIECE_BYTES, (waiting) =>
        waiting ? writes.commit() : writes.commitIfDue(),
      );
    writes.commit();
  } finally {
    writes.rollback();
    db.pragma(`cache_size = ${Number(cacheSize)}`);
    db.pragma(`synchronous = ${Number(synchronous)}`);
  }
  // The size is what the file had when read: an unchanged file is not opened next time, and a
  // partial last line (the offset stops before it) is read once the file grows. Saved only once
  // every thread is done: a failed scan reads the same bytes again next time (adding nothing twice).
  saveCursors(db, imported.cursors);
  summary.duplicates = summary.records - summary.alreadyMetered - summary.added;
  summary.ms = Date.now() - started;
  return summary;
}
