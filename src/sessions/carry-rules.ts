/**
 * Which files carry a process-runner session between hosts, and which of them a host restores
 * before it runs the session's next turn (issue 17, sessions/carry.ts) — pure rules over plain data.
 *
 * A name is a path relative to the engine's config directory, of the shape its kind declares
 * (`claude-projects`: `projects/<dir>/<session id>.jsonl`, one directory level of safe characters,
 * the session's own id). A name of any other shape — from a tampered row — is refused, never
 * written: the database does not choose where a host writes.
 */
import type { SessionFileMeta } from '../core/ports/session-files.js';

export type SessionFilesKind = 'claude-projects';

/** One directory name: safe characters only, not `.` or `..`. */
const SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,255}$/;
/** An engine session id as it may appear in a file name. */
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9-]{0,127}$/;

/** Where the engine keeps a session's files: `<parent>/<any safe dir>/<file>` under its config dir. */
export function sessionFileLookup(
  kind: SessionFilesKind,
  engineSessionId: string | null,
): { parent: string; file: string } | undefined {
  if (!engineSessionId || !SESSION_ID.test(engineSessionId)) return undefined;
  switch (kind) {
    case 'claude-projects':
      return { parent: 'projects', file: `${engineSessionId}.jsonl` };
  }
}

/** Whether `name` is a file this kind of engine keeps for this session. */
export function isSessionFileName(
  kind: SessionFilesKind,
  name: string,
  engineSessionId: string | null,
): boolean {
  const lookup = sessionFileLookup(kind, engineSessionId);
  if (!lookup) return false;
  const parts = name.split('/');
  return (
    parts.length === 3 &&
    parts[0] === lookup.parent &&
    SEGMENT.test(parts[1] ?? '') &&
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
  stored: readonly SessionFileMeta[],
  local: ReadonlyMap<string, string | null>,
  host: string,
): RestoreStep[] {
  return stored.map((meta) => {
    if (!isSessionFileName(kind, meta.name, engineSessionId)) return { kind: 'refused', meta };
    const here = local.get(meta.name) ?? null;
    if (here === meta.digest) return { kind: 'same', meta };
    if (here !== null && meta.hostId === host) return { kind: 'ours', meta };
    return { kind: 'restore', meta };
  });
}
