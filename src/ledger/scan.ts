import { type Dirent, existsSync, readdirSync, statSync } from 'node:fs';
import { availableParallelism, homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describeError, LoopError } from '../core/errors.js';
import type { Db } from '../store/db.js';
import type { Ledger, LedgerEntry } from './ledger.js';
import { type Payer, sessionPayer } from './payer.js';
import { type FileScan, type ScanJob, type ScannedRecord, type ScanResult, scanFiles } from './scan-file.js';

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
const PER_TURN_METERS = new Set(['stream-json', 'codex-json', 'gemini-json', 'otel']);

/** About what a thread scans while a worker thread starts (~50 ms). */
const WORKER_START_BYTES = 32 * 1024 * 1024;

/** Below this much to read, threads cost more than they save. */
const THREAD_THRESHOLD_BYTES = 32 * 1024 * 1024;

export async function scanTranscripts(
  db: Db,
  ledger: Ledger,
  dirsIn: readonly string[],
  options: { workers?: number; onProgress?: (done: number, total: number) => void } = {},
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
    total < THREAD_THRESHOLD_BYTES
      ? 0
      : Math.max(1, Math.min(options.workers ?? availableParallelism(), jobs.length));
  const results: ScanResult[] =
    threads === 0 ? scanFiles(jobs, metered) : await scanInWorkers(jobs, threads, metered);
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
  // The first copy of each request, by key (the arrays the threads returned: no copies are made).
  const unique = new Map<string, ScannedRecord>();
  // First pass: the requests of sessions this installation meters per turn, wherever they appear.
  const meteredKeys = new Set<string>();
  for (const r of results) {
    if ('error' in r) continue;
    for (const record of r.scan.records) {
      if (PER_TURN_METERS.has(sessions.get(record[1])?.meter ?? '')) meteredKeys.add(record[0]);
    }
  }
  const cursors: Array<{ path: string; scan: FileScan }> = [];
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
      // The same key from another thread's files: one entry, with the largest output count.
      const earlier = unique.get(key);
      if (earlier) {
        if (record[5] > earlier[5]) earlier[5] = record[5];
        continue;
      }
      // Metered per turn already — also when a copy of it sits in another session's file (a fork).
      if (meteredKeys.has(key)) {
        summary.alreadyMetered += 1;
        continue;
      }
      unique.set(key, record);
    }
  }
  // Ledger entries are made one at a time as they are inserted, not all held at once.
  function* entries(): Generator<LedgerEntry> {
    for (const [key, sessionId, at, model, input, output, cacheRead, cacheCreation] of unique.values()) {
      const ours = sessions.get(sessionId);
      yield {
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
    }
  }
  const saveCursor = db.prepare(
    `INSERT INTO scan_files (path, inode, size, offset, scanned_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (path) DO UPDATE SET inode = excluded.inode, size = excluded.size, offset = excluded.offset,
         scanned_at = excluded.scanned_at`,
  );
  const now = new Date().toISOString();
  // A smaller page cache than the connection's default (16 MB) for the import: the rows are
  // written once, and what the cache would hold is the import's own pages.
  const cacheSize = db.pragma('cache_size', { simple: true }) as number;
  db.pragma('cache_size = -4000');
  db.transaction(() => {
    const added = ledger.add(entries());
    summary.added = added.inserted;
    summary.warnings.push(...added.warnings);
    // The size is what the file had when read: an unchanged file is not opened next time, and a
    // partial last line (the offset stops before it) is read once the file grows.
    for (const { path, scan } of cursors) saveCursor.run(path, scan.inode, scan.size, scan.offset, now);
  })();
  db.pragma(`cache_size = ${Number(cacheSize)}`);
  summary.duplicates = summary.records - summary.alreadyMetered - summary.added;
  summary.ms = Date.now() - started;
  return summary;
}

/**
 * Spread the files over `n` threads by size (largest first onto the least loaded): this thread
 * scans the first share itself while `n - 1` worker threads scan the others (a thread of its own
 * would leave this one idle, and cost another heap).
 */
async function scanInWorkers(
  jobs: ReadonlyArray<ScanJob & { bytes: number }>,
  n: number,
  metered: ReadonlySet<string>,
): Promise<ScanResult[]> {
  // This thread starts at once; a worker starts its scan later (a heap, the module): this thread's
  // share is larger by about what it reads meanwhile.
  const shares: Array<{ bytes: number; jobs: ScanJob[] }> = Array.from({ length: n }, (_, i) => ({
    bytes: i === 0 ? -WORKER_START_BYTES : 0,
    jobs: [],
  }));
  for (const job of [...jobs].sort((a, b) => b.bytes - a.bytes)) {
    const share = shares.reduce((min, s) => (s.bytes < min.bytes ? s : min));
    share.bytes += job.bytes;
    share.jobs.push({ path: job.path, offset: job.offset, inode: job.inode });
  }
  const [own, ...others] = shares;
  const url = new URL('./scan-worker.js', import.meta.url);
  const workers: Worker[] = [];
  try {
    const started = others
      .filter((s) => s.jobs.length > 0)
      .map(
        (share) =>
          new Promise<ScanResult[]>((resolvePart, reject) => {
            const worker = new Worker(url, { workerData: { jobs: share.jobs, metered: [...metered] } });
            workers.push(worker);
            let result: ScanResult[] | undefined;
            worker.once('message', (m: ScanResult[]) => {
              result = m;
            });
            worker.once('error', reject);
            // Settled on every exit: a worker that ends without its results is an error too.
            worker.once('exit', (code) =>
              result
                ? resolvePart(result)
                : reject(new Error(`a scan thread exited (code ${code}) without its results`)),
            );
          }),
      );
    // Nothing rejects unhandled while this thread scans its own share.
    for (const p of started) p.catch(() => {});
    const mine = scanFiles(own?.jobs ?? [], metered);
    const parts = await Promise.all(started);
    return [...mine, ...parts.flat()];
  } catch (cause) {
    // One thread failed: the others' work is wasted anyway; stop them instead of waiting.
    await Promise.all(workers.map((w) => w.terminate()));
    throw new LoopError('internal', `the transcript scan failed: ${describeError(cause)}`, {
      cause,
      hint: 'Run it again with --workers 1 to scan in one thread; nothing was recorded for this scan.',
    });
  }
}
