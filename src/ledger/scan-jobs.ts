import { type Dirent, existsSync, readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import type { Db } from '../store/db.js';
import type { ScanJob } from './scan-file.js';

/** Sessions metered from result events or telemetry: their requests are in the ledger already. */
export const PER_TURN_METERS = new Set(['stream-json', 'codex-json', 'gemini-json', 'otel', 'wire']);

/** A file to read, from where the last scan stopped, and how many bytes that is. */
export type SizedJob = ScanJob & { bytes: number };

/** One of this installation's sessions, by the engine's session id. */
export interface OwnSession {
  id: string;
  work_item: string;
  engine: string;
  runner: string;
  engine_session_id: string;
  credential_kind: string | null;
  payer_id: string | null;
  meter: string | null;
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
export function listFiles(dirs: readonly string[]): string[] {
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

/** The files that changed since the last scan, each from where that scan stopped. */
export function changedFiles(db: Db, files: readonly string[]): SizedJob[] {
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
  const jobs: SizedJob[] = [];
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
  return jobs;
}

/** Sessions of this installation by engine session id, with the meter of their last turn. */
export function ownSessions(db: Db): Map<string, OwnSession> {
  const rows = db
    .prepare(
      `SELECT s.id, s.work_item, s.engine, s.runner, s.engine_session_id, s.credential_kind, s.payer_id,
         (SELECT meter FROM turns t WHERE t.session_id = s.id ORDER BY t.id DESC LIMIT 1) AS meter
       FROM sessions s WHERE s.engine_session_id IS NOT NULL`,
    )
    .all() as OwnSession[];
  return new Map(rows.map((s) => [s.engine_session_id, s]));
}

/** Engine session ids whose requests are metered per turn (not imported again). */
export function meteredPerTurn(sessions: ReadonlyMap<string, OwnSession>): Set<string> {
  return new Set(
    [...sessions]
      .filter(([, v]) => PER_TURN_METERS.has(v.meter ?? ''))
      .map(([engineSessionId]) => engineSessionId),
  );
}

/** The cursor saved for each file read: where the next scan starts. */
export function saveCursors(
  db: Db,
  cursors: ReadonlyArray<{ path: string; scan: { inode: number; size: number; offset: number } }>,
): void {
  const save = db.prepare(
    `INSERT INTO scan_files (path, inode, size, offset, scanned_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (path) DO UPDATE SET inode = excluded.inode, size = excluded.size, offset = excluded.offset,
         scanned_at = excluded.scanned_at`,
  );
  const now = new Date().toISOString();
  db.transaction(() => {
    for (const { path, scan } of cursors) save.run(path, scan.inode, scan.size, scan.offset, now);
  })();
}
