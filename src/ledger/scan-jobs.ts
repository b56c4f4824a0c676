import { type Dirent, existsSync, readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import type { ScanCursor } from '../core/ports/ledger.js';
import type { Meter, SessionRecord } from '../core/ports/sessions.js';
import type { ScanJob } from './scan-file.js';

/** Sessions metered from result events or telemetry: their requests are in the ledger already. */
export const PER_TURN_METERS = new Set(['stream-json', 'codex-json', 'gemini-json', 'otel', 'wire']);

/** A file to read, from where the last scan stopped, and how many bytes that is. */
export type SizedJob = ScanJob & { bytes: number };

/** One of this installation's sessions, by the engine's session id, with its last turn's meter. */
export type OwnSession = Pick<
  SessionRecord,
  'id' | 'workItem' | 'engine' | 'runner' | 'credentialKind' | 'payerId'
> & {
  engineSessionId: string;
  lastMeter: Meter | null;
};

/** Where Claude Code keeps transcripts for this environment. */
export function defaultTranscriptDirs(env: Readonly<Record<string, string | undefined>>): string[] {
  return transcriptDirCandidates(env).filter((d) => existsSync(d));
}

/** Where Claude Code would keep transcripts for this environment, whether they exist yet or not. */
export function transcriptDirCandidates(env: Readonly<Record<string, string | undefined>>): string[] {
  const home = env.HOME && isAbsolute(env.HOME) ? env.HOME : homedir();
  return env.CLAUDE_CONFIG_DIR
    ? env.CLAUDE_CONFIG_DIR.split(',').map((d) => join(d.trim(), 'projects'))
    : [join(home, '.claude', 'projects'), join(home, '.config', 'claude', 'projects')];
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

/** The files that changed since the last scan (its cursors: `known`), each from where that scan stopped. */
export function changedFiles(known: ReadonlyMap<string, ScanCursor>, files: readonly string[]): SizedJob[] {
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

/** Sessions of this installation by engine session id. */
export function ownSessions(sessions: readonly OwnSession[]): Map<string, OwnSession> {
  return new Map(sessions.map((s) => [s.engineSessionId, s]));
}

/** Engine session ids whose requests are metered per turn (not imported again). */
export function meteredPerTurn(sessions: ReadonlyMap<string, OwnSession>): Set<string> {
  return new Set(
    [...sessions]
      .filter(([, v]) => PER_TURN_METERS.has(v.lastMeter ?? ''))
      .map(([engineSessionId]) => engineSessionId),
  );
}
