import { type Dirent, existsSync, readdirSync, statSync } from 'node:fs';
import { availableParallelism, homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describeError, LoopError } from '../core/errors.js';
import type { Db } from '../store/db.js';
import type { Ledger, LedgerEntry } from './ledger.js';
import { type Payer, sessionPayer } from './payer.js';
import {
  type FileScan,
  pieces,
  type ScanJob,
  type ScannedJob,
  type ScannedRecord,
  type ScanResult,
  scanFiles,
} from './scan-file.js';

/**
 * `the-loop usage scan`: imports Claude Code's transcript history into the usage ledger,
 * incrementally. Each file is read from where the last scan stopped (kept in `scan_files`); a file
 * that shrank or was replaced is read again from the start, and the ledger's unique (meter, source id)
 * key makes re-reading harmless. Work is spread over worker threads (one per core) when there is
 * enough of it. Requests of sessions this installation already meters from their result events
 * (process-runner Claude sessions) are skipped: they are in the ledger once, per turn.
 */
export interface ScanSummary {
  dirs: string[];
  files: number;
  filesRead: number;
  bytesRead: number;
  records: number;
  added: number;
  /** Records already in the ledger (duplicated records, re-reads, the tmux runner's own rows). */
  duplicates: number;
  /** Records of sessions metered per turn from result events (not added again). */
  alreadyMetered: number;
  skippedLines: number;
  restarted: number;
  unreadable: string[];
  warnings: string[];
  /** Threads that scanned, this one included (0: too little to read for threads; this one alone). */
  workers: number;
  ms: number;
}

/** Where Claude Code keeps transcripts for this environment. */
export function defaultTranscriptDirs(env: Readonly<Record<string, string | undefined>>): string[] {
  const home = env.HOME && isAbsolute(env.HOME) ? env.HOME : homedir();
  const candidates = env.CLAUDE_CONFIG_DIR
    ? env.CLAUDE_CONFIG_DIR.split(',').map((d) => join(d.trim(), 'projects'))
    : [join(home, '.claude', 'projects'), join(home, '.config', 'claude', 'projects')];
  return candidates.filter((d) => existsSync(d));
}

/** Every `.jsonl` file under the dirs (symbolic links not followed: no loops). */
function listFiles(dirs: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.isFile() && e.name.endsWith('.jsonl')) out.push(path);
    }
  };
  for (const d of dirs) walk(d);
  return out.sort();
}

/** Sessions metered from result events or telemetry: their requests are in the ledger already. */
const PER_TURN_METERS = new Set(['stream-json', 'codex-json', 'gemini-json', 'otel', 'wire']);

/**
 * This thread's share of the bytes against a worker's (1): it also inserts every row, which costs
 * it about as much as scanning half the bytes (measured on the bench corpus, two threads).
 */
const OWN_SHARE_WEIGHT = 0.3;
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
  const known = new Map(
    (
      db.prepare('SELECT path, inode, size, offset FROM scan_files').all() as Array<{
        path: string;
        inode: number;
        size: number;
        offset: number;
      }>
    ).map((r) => [r.path, r]),
  );
  const jobs: Array<ScanJob & { bytes: number }> = [];
  for (const path of files) {
    let size: number;
    let ino: number;
    try {
      const st = statSync(path);
      size = st.size;
      ino = st.ino;
    } catch {
      continue;
    }
    const seen = known.get(path);
    if (seen && seen.inode === ino && seen.size === size) continue;
    // scanFile starts over by itself when the file was replaced or truncated.
    const resumesAt = seen && seen.inode === ino && seen.offset <= size ? seen.offset : 0;
    jobs.push({ path, offset: seen?.offset ?? 0, inode: seen?.inode, bytes: size - resumesAt });
  }
  // Requests of our own sessions: attributed to them; those metered per turn are not added again.
  const sessions = new Map(
    (
      db
        .prepare(
          `SELECT s.id, s.work_item, s.engine, s.runner, s.engine_session_id, s.credential_kind, s.payer_id,
             (SELECT meter FROM turns t WHERE t.session_id = s.id ORDER BY t.id DESC LIMIT 1) AS meter
           FROM sessions s WHERE s.engine_session_id IS NOT NULL`,
        )
        .all() as Array<{
        id: string;
        work_item: string;
        engine: string;
        runner: string;
        engine_session_id: string;
        credential_kind: string | null;
        payer_id: string | null;
        meter: string | null;
      }>
    ).map((s) => [s.engine_session_id, s]),
  );
  const metered = new Set(
    [...sessions]
      .filter(([, v]) => PER_TURN_METERS.has(v.meter ?? ''))
      .map(([engineSessionId]) => engineSessionId),
  );
  const total = jobs.reduce((n, j) => n + j.bytes, 0);
  const threads =
    total < (options.threadThresholdBytes ?? THREAD_THRESHOLD_BYTES)
      ? 0
      : Math.max(1, Math.min(options.workers ?? availableParallelism(), jobs.length));
  const startedAt = new Map(jobs.map((j) => [j.path, j]));
  const summary: ScanSummary = {
    dirs,
    files: files.length,
    filesRead: 0,
    bytesRead: 0,
    records: 0,
    added: 0,
    duplicates: 0,
    alreadyMetered: 0,
    skippedLines: 0,
    restarted: 0,
    unreadable: [],
    warnings: [],
    workers: threads,
    ms: 0,
  };
  const unknownPayer: Payer = { kind: 'unknown', id: null };
  // The output count recorded for each request so far, by key (the records themselves are let go
  // once inserted).
  const unique = new Map<string, number>();
  // Requests of sessions this installation meters per turn, wherever a copy of them appears.
  const meteredKeys = new Set<string>();
  const countedMetered = new Set<string>();
  const cursors: Array<{ path: string; scan: FileScan }> = [];
  const entry = ([
    key,
    sessionId,
    at,
    model,
    input,
    output,
    cacheRead,
    cacheCreation,
  ]: ScannedRecord): LedgerEntry => {
    const ours = sessions.get(sessionId);
    return {
      meter: 'transcript',
      sourceId: key,
      at,
      sessionId: ours?.id ?? null,
      workItem: ours?.work_item ?? null,
      turnId: null,
      engine: ours?.engine ?? 'claude',
      runner: ours?.runner ?? null,
      model: model || null,
      usage: {
        inputTokens: input,
        outputTokens: output,
        cacheReadTokens: cacheRead,
        cacheCreationTokens: cacheCreation,
        reasoningTokens: 0,
      },
      payer: ours ? sessionPayer(ours.credential_kind, ours.payer_id) : unknownPayer,
    };
  };
  // Ledger entries are made one at a time as they are inserted, not all held at once.
  function* entries(records: readonly ScannedRecord[]): Generator<LedgerEntry> {
    for (const record of records) yield entry(record);
  }
  const importStarted = new Date().toISOString();
  const writes = batchedWrites(db, COMMIT_EVERY_MS);
  const unimport = db.prepare(
    `DELETE FROM usage_ledger WHERE meter = 'transcript' AND source_id = ? AND turn_id IS NULL
     RETURNING recorded_at`,
  );
  /**
   * One thread's results into the ledger, as soon as they are there: this thread inserts its own
   * share while the other threads still scan. A request another thread finds later with a larger
   * output count corrects its row; one that turns out to be metered per turn (a fork's copy read
   * first) is taken out again.
   */
  const take = (results: readonly ScanResult[]): void => {
    const fresh: ScannedRecord[] = [];
    const grown: ScannedRecord[] = [];
    const nowMetered: string[] = [];
    for (const r of results) {
      if ('error' in r) continue;
      for (const record of r.scan.records) {
        if (!PER_TURN_METERS.has(sessions.get(record[1])?.meter ?? '') || meteredKeys.has(record[0]))
          continue;
        meteredKeys.add(record[0]);
        if (unique.has(record[0])) nowMetered.push(record[0]);
      }
    }
    for (const r of results) {
      if ('error' in r) {
        summary.unreadable.push(`${r.path}: ${r.error}`);
        continue;
      }
      const { scan } = r;
      cursors.push(r);
      summary.filesRead += 1;
      summary.bytesRead += scan.restarted ? scan.size : scan.size - (startedAt.get(r.path)?.offset ?? 0);
      summary.skippedLines += scan.skipped;
      summary.records += scan.duplicates;
      if (scan.restarted) summary.restarted += 1;
      summary.warnings.push(...scan.warnings);
      for (const record of scan.records) {
        const key = record[0];
        // Claude Code's own notices (API errors, "No response requested.") are not requests.
        if (record[3] === '<synthetic>') continue;
        summary.records += 1;
        // The same key from another thread's files: one row, with the largest output count.
        const earlier = unique.get(key);
        if (earlier !== undefined) {
          // Its row takes the larger count (the ledger keeps the largest output of a source id).
          if (record[5] > earlier) {
            unique.set(key, record[5]);
            grown.push(record);
          }
          continue;
        }
        // Metered per turn already — also when a copy of it sits in another session's file (a fork).
        // Counted once per request; its other copies are duplicates.
        if (meteredKeys.has(key)) {
          if (!countedMetered.has(key)) {
            countedMetered.add(key);
            summary.alreadyMetered += 1;
          }
          continue;
        }
        unique.set(key, record[5]);
        fresh.push(record);
      }
    }
    writes.begin();
    db.transaction(() => {
      const added = ledger.add(entries(fresh));
      summary.added += added.inserted;
      summary.warnings.push(...added.warnings);
      if (grown.length > 0) ledger.add(entries(grown));
      for (const key of nowMetered) {
        unique.delete(key);
        countedMetered.add(key);
        summary.alreadyMetered += 1;
        const removed = unimport.get(key) as { recorded_at: string } | undefined;
        if (removed && removed.recorded_at >= importStarted) summary.added -= 1;
      }
    })();
    writes.commitIfDue();
  };
  const saveCursor = db.prepare(
    `INSERT INTO scan_files (path, inode, size, offset, scanned_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (path) DO UPDATE SET inode = excluded.inode, size = excluded.size, offset = excluded.offset,
         scanned_at = excluded.scanned_at`,
  );
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
  const now = new Date().toISOString();
  db.transaction(() => {
    for (const { path, scan } of cursors) saveCursor.run(path, scan.inode, scan.size, scan.offset, now);
  })();
  summary.duplicates = summary.records - summary.alreadyMetered - summary.added;
  summary.ms = Date.now() - started;
  return summary;
}

/**
 * One write transaction across several pieces, committed about every `everyMs`: each commit writes
 * the index pages it touched again (a commit per piece doubled the insert time), while a
 * transaction held for the whole import would keep the daemon from writing for that long.
 */
function batchedWrites(db: Db, everyMs: number) {
  let since = 0;
  return {
    begin(): void {
      if (db.inTransaction) return;
      db.exec('BEGIN IMMEDIATE');
      since = Date.now();
    },
    commitIfDue(): void {
      if (db.inTransaction && Date.now() - since >= everyMs) db.exec('COMMIT');
    },
    commit(): void {
      if (db.inTransaction) db.exec('COMMIT');
    },
    /** After a failure: what was not committed is dropped (the next scan reads it again). */
    rollback(): void {
      if (db.inTransaction) db.exec('ROLLBACK');
    },
  };
}

/**
 * Spread the files over `n` threads by size (largest first onto the least loaded): this thread
 * scans the first share itself while `n - 1` worker threads scan the others. Every thread hands its
 * results over in pieces of about `PIECE_BYTES`, and this thread inserts each piece as it comes —
 * between pieces of its own share, and while the others still scan — so little is left to insert
 * when the last thread ends. Inserting is this thread's work: its share is smaller by that much.
 */
async function scanInWorkers(
  jobs: ReadonlyArray<ScanJob & { bytes: number }>,
  n: number,
  metered: ReadonlySet<string>,
  take: (results: readonly ScanResult[]) => void,
  pieceBytes: number,
  /**
   * Called before this thread scans a piece (commit if the lock was held long enough) and before it
   * only waits (commit): the write lock is never held much longer than COMMIT_EVERY_MS.
   */
  pause: (waiting: boolean) => void,
): Promise<void> {
  const shares: Array<{ load: number; weight: number; jobs: ScannedJob[] }> = Array.from(
    { length: n },
    (_, i) => ({ load: 0, weight: i === 0 ? OWN_SHARE_WEIGHT : 1, jobs: [] }),
  );
  for (const job of [...jobs].sort((a, b) => b.bytes - a.bytes)) {
    const share = shares.reduce((min, s) => (s.load < min.load ? s : min));
    share.load += job.bytes / share.weight;
    share.jobs.push({ path: job.path, offset: job.offset, inode: job.inode, bytes: job.bytes });
  }
  const [own, ...others] = shares;
  const url = new URL('./scan-worker.js', import.meta.url);
  const workers: Worker[] = [];
  try {
    const started = others
      .filter((s) => s.jobs.length > 0)
      .map(
        (share) =>
          new Promise<void>((resolvePart, reject) => {
            const worker = new Worker(url, {
              workerData: { jobs: share.jobs, metered: [...metered], pieceBytes },
              // It allocates little that lives: a small young generation keeps its heap small
              // (5 MB less peak memory on the bench corpus, no slower).
              resourceLimits: { maxYoungGenerationSizeMb: 8 },
            });
            workers.push(worker);
            let done = false;
            worker.on('message', (m: { piece: ScanResult[] } | { done: true }) => {
              if ('piece' in m) {
                try {
                  take(m.piece);
                } catch (error) {
                  reject(error);
                }
              } else done = true;
            });
            worker.once('error', reject);
            // Settled on every exit: a worker that ends without saying it is done is an error too.
            worker.once('exit', (code) =>
              done
                ? resolvePart()
                : reject(new Error(`a scan thread exited (code ${code}) before it was done`)),
            );
          }),
      );
    let failed: unknown;
    for (const p of started) p.catch((error: unknown) => (failed ??= error));
    for (const piece of pieces(own?.jobs ?? [], pieceBytes)) {
      if (failed !== undefined) throw failed;
      pause(false);
      take(scanFiles(piece, metered));
      // Let the other threads' pieces in (their messages are taken between two of ours).
      await new Promise<void>((resolveTurn) => setImmediate(resolveTurn));
    }
    pause(true);
    await Promise.all(started);
  } catch (cause) {
    // One thread failed: the others' work is wasted anyway; stop them instead of waiting.
    await Promise.all(workers.map((w) => w.terminate()));
    throw new LoopError('internal', `the transcript scan failed: ${describeError(cause)}`, {
      cause,
      hint: 'Run it again (--workers 1 scans in one thread): its files are read again, and what this scan added is not added twice.',
    });
  }
}
