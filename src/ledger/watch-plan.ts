import { isAbsolute, join, relative, resolve, sep } from 'node:path';

/**
 * The transcript watcher's decisions, over plain data (the watcher, `watch.ts`, does the I/O): which
 * directory trees are watched, which of their directories are entered and which files are
 * transcripts, whether a changed file has anything new to import, and how a large catch-up is cut
 * into batches.
 */

/** A directory tree the daemon watches for transcripts. */
export interface WatchRoot {
  dir: string;
  /**
   * Where it comes from: `config` (usage.watch: warned about while it does not exist), `claude`
   * (Claude Code's config dir), `sessions` (the sessions' own config dirs in the sandbox).
   */
  origin: 'config' | 'claude' | 'sessions';
  /**
   * Below `dir`, the paths a directory must lie on to be entered (`*`: any name); below the end of
   * one, everything. Absent: everything.
   */
  only?: ReadonlyArray<readonly string[]>;
}

export interface WatchRootsInput {
  /** `usage.watch` as written. */
  watch: readonly string[];
  /** Where a relative `usage.watch` entry starts (the config file's directory). */
  configDir: string;
  home: string | undefined;
  /** `usage.watchClaude`. */
  watchClaude: boolean;
  /** Claude Code's projects folders for the daemon's environment (existing or not). */
  claudeDirs: readonly string[];
  dataDir: string;
  /** Engines whose sessions get a config dir of their own holding Claude Code transcripts. */
  homeEngines: readonly string[];
}

/** The watched trees: usage.watch, then Claude Code's projects folders; a tree inside another once. */
export function watchRoots(input: WatchRootsInput): { roots: WatchRoot[]; errors: string[] } {
  const errors: string[] = [];
  const roots: WatchRoot[] = [];
  for (const raw of input.watch) {
    const dir = expandDir(raw, input.configDir, input.home);
    if (typeof dir === 'string') roots.push({ dir, origin: 'config' });
    else errors.push(`usage.watch ${JSON.stringify(raw)}: ${dir.error}`);
  }
  if (input.watchClaude) {
    for (const dir of input.claudeDirs) roots.push({ dir: resolve(dir), origin: 'claude' });
    if (input.homeEngines.length > 0) {
      roots.push({
        dir: join(resolve(input.dataDir), 'homes'),
        origin: 'sessions',
        // <dataDir>/homes/<slug>/<engine>/projects: the engine's config dir of one session.
        only: input.homeEngines.map((engine) => ['*', engine, 'projects']),
      });
    }
  }
  return { roots: withoutNested(roots), errors };
}

function expandDir(raw: string, configDir: string, home: string | undefined): string | { error: string } {
  if (raw === '~' || raw.startsWith('~/')) {
    if (!home || !isAbsolute(home)) return { error: '~ needs HOME (an absolute path), which is not set' };
    return resolve(home, raw.slice(2));
  }
  if (raw.startsWith('~')) return { error: '~user is not supported' };
  return resolve(configDir, raw);
}

/** Drop a root that lies inside another one entered whole (its files are the other's already). */
function withoutNested(roots: readonly WatchRoot[]): WatchRoot[] {
  const out: WatchRoot[] = [];
  for (const root of roots) {
    const inside = roots.some(
      (other) =>
        other !== root && other.only === undefined && within(other.dir, root.dir) && other.dir !== root.dir,
    );
    const twice = out.some((o) => o.dir === root.dir);
    if (!inside && !twice) out.push(root);
  }
  return out;
}

function within(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** The names from `root.dir` down to `path` (empty: the root itself); undefined when outside it. */
export function segmentsBelow(root: WatchRoot, path: string): string[] | undefined {
  if (!within(root.dir, path)) return undefined;
  const rel = relative(root.dir, path);
  return rel === '' ? [] : rel.split(sep);
}

/** Whether the directory at `segments` below the root is entered (and watched). */
export function entersDir(root: WatchRoot, segments: readonly string[]): boolean {
  if (!root.only) return true;
  return root.only.some((pattern) => matchesPrefix(pattern, segments));
}

/** Whether files of the directory at `segments` below the root may be transcripts. */
export function holdsTranscripts(root: WatchRoot, segments: readonly string[]): boolean {
  if (!root.only) return true;
  return root.only.some((pattern) => segments.length >= pattern.length && matchesPrefix(pattern, segments));
}

function matchesPrefix(pattern: readonly string[], segments: readonly string[]): boolean {
  const n = Math.min(pattern.length, segments.length);
  for (let i = 0; i < n; i++) if (pattern[i] !== '*' && pattern[i] !== segments[i]) return false;
  return true;
}

/** A transcript file's name: `.jsonl`, and not a hidden or editor's temporary file. */
export const isTranscriptName = (name: string): boolean => name.endsWith('.jsonl') && !name.startsWith('.');

/** Where the last import of a file stopped (its scan cursor). */
export interface FileCursor {
  inode: number;
  size: number;
  offset: number;
}

/** How far a file's unfinished last line was already looked through for its end (see `checkFile`). */
export interface LookedAt {
  inode: number;
  offset: number;
  to: number;
}

/**
 * What to do with a file that may have changed: nothing (`unchanged`), import it (`import`), or
 * first look for a line end in `[from, to)` (`look`): a file that only grew has something to import
 * only if a line ended in what was added (only complete lines are imported) — a file whose last line
 * is still being written (a long one: an image, a large tool result) would otherwise be read again
 * from that line's start at every change, for nothing: quadratic in the line's length.
 */
export function checkFile(
  cursor: FileCursor | undefined,
  file: { ino: number; size: number },
  looked: LookedAt | undefined,
): { kind: 'unchanged' } | { kind: 'import' } | { kind: 'look'; from: number; to: number } {
  if (!cursor || cursor.inode !== file.ino) return { kind: 'import' };
  if (file.size === cursor.size) return { kind: 'unchanged' };
  // Shrunk: truncated (the scan reads it again from the start) or rewritten.
  if (file.size < cursor.size) return { kind: 'import' };
  // Every complete line up to `cursor.size` was read: a new one ends after it, or there is none.
  const seen =
    looked && looked.inode === cursor.inode && looked.offset === cursor.offset
      ? Math.max(looked.to, cursor.size)
      : cursor.size;
  if (seen >= file.size) return { kind: 'unchanged' };
  return { kind: 'look', from: seen, to: file.size };
}

/** Consecutive batches of about `maxBytes` bytes to read each (a file is never split). */
export function batchesOf<T extends { bytes: number }>(jobs: readonly T[], maxBytes: number): T[][] {
  const out: T[][] = [];
  let batch: T[] = [];
  let bytes = 0;
  for (const job of jobs) {
    if (batch.length > 0 && bytes + job.bytes > maxBytes) {
      out.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(job);
    bytes += job.bytes;
  }
  if (batch.length > 0) out.push(batch);
  return out;
}

/** The delay before the next import after `failures` failed ones in a row (none: `debounceMs`). */
export function retryDelayMs(failures: number, debounceMs: number, maxMs: number): number {
  if (failures <= 0) return debounceMs;
  return Math.min(maxMs, 1000 * 2 ** Math.min(failures - 1, 16));
}
