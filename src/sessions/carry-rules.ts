/**
 * Which files carry a process-runner session between hosts, and which of them a host restores
 * before it runs the session's next turn (issue 17, sessions/carry.ts) — pure rules over plain data.
 *
 * A name is a path relative to the engine's config directory, of the shape its kind declares
 * (`claude-projects`: `projects/<the session's cwd, each character not a letter or digit as
 * "-">/<session id>.jsonl`): one file per session, in the one directory the engine reads it from. A name of any other shape — from a tampered row — is refused, never
 * written: the database does not choose where a host writes.
 */
import type { SessionFileMeta } from '../core/ports/session-files.js';

export type SessionFilesKind = 'claude-projects';

/** An engine session id as it may appear in a file name. */
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9-]{0,127}$/;
/** Claude Code keeps a project directory name whole up to this length, then cuts it and adds a hash. */
const MAX_PROJECT_DIR = 200;
const PROJECT_DIR = /^[A-Za-z0-9-]{1,255}$/;

/**
 * Where the engine keeps a session's files under its config directory: `<parent>/<dir>/<file>`,
 * `dir` named after the session's working directory — exactly, or (a long path) starting with
 * `prefix`. Claude Code's rule, observed with 2.1.197: every character of the cwd that is not a
 * letter or a digit becomes `-`.
 */
export interface SessionFileLookup {
  parent: string;
  dir: { exact: string } | { prefix: string };
  file: string;
}

export function sessionFileLookup(
  kind: SessionFilesKind,
  engineSessionId: string | null,
  cwd: string,
): SessionFileLookup | undefined {
  if (!engineSessionId || !SESSION_ID.test(engineSessionId) || cwd.length === 0) return undefined;
  switch (kind) {
    case 'claude-projects': {
      const name = cwd.replace(/[^A-Za-z0-9]/g, '-');
      const dir =
        name.length <= MAX_PROJECT_DIR ? { exact: name } : { prefix: name.slice(0, MAX_PROJECT_DIR) };
      return { parent: 'projects', dir, file: `${engineSessionId}.jsonl` };
    }
  }
}

/** Whether `dir` is the lookup's directory (a long one: its prefix, then safe characters). */
export const isLookupDir = (lookup: SessionFileLookup, dir: string): boolean =>
  'exact' in lookup.dir
    ? dir === lookup.dir.exact
    : dir.startsWith(lookup.dir.prefix) && PROJECT_DIR.test(dir);

/** Whether `name` is a file this kind of engine keeps for this session in this working directory. */
export function isSessionFileName(
  kind: SessionFilesKind,
  name: string,
  engineSessionId: string | null,
  cwd: string,
): boolean {
  const lookup = sessionFileLookup(kind, engineSessionId, cwd);
  if (!lookup) return false;
  const parts = name.split('/');
  return (
    parts.length === 3 &&
    parts[0] === lookup.parent &&
    isLookupDir(lookup, parts[1] ?? '') &&
    parts[2] === lookup.file
  );
}

export type RestoreStep =
  | { kind: 'restore'; meta: SessionFileMeta }
  /** The local copy is the one stored. */
  | { kind: 'same'; meta: SessionFileMeta }
  /** This host saved it last and still has its copy: as new as the stored one, or newer. */
  | { kind: 'ours'; meta: SessionFileMeta }
  | { kind: 'refused'; meta: SessionFileMeta };

/**
 * What to do with each stored file: restore it, unless the local copy is the same, or this host
 * saved it last and still has its own (a save that failed after a later turn here must not be
 * undone by an older stored copy). Another host's save is newer than any local copy: the session's
 * lease went there after this host last ran it.
 */
export function planRestore(
  kind: SessionFilesKind,
  engineSessionId: string | null,
  cwd: string,
  stored: readonly SessionFileMeta[],
  local: ReadonlyMap<string, string | null>,
  host: string,
): RestoreStep[] {
  return stored.map((meta) => {
    if (!isSessionFileName(kind, meta.name, engineSessionId, cwd)) return { kind: 'refused', meta };
    const here = local.get(meta.name) ?? null;
    if (here === meta.digest) return { kind: 'same', meta };
    if (here !== null && meta.hostId === host) return { kind: 'ours', meta };
    return { kind: 'restore', meta };
  });
}
