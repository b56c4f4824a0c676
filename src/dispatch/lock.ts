import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../core/errors.js';
import { pidAlive } from '../os/proc.js';

export type LockHolder = { pid: number; kind: 'daemon' | 'run' };

/** The dispatcher lock of a data directory. */
export const lockPath = (dataDir: string) => join(dataDir, 'dispatch.lock');

/** Why a daemon cannot dispatch from a data directory whose lock another process holds. */
export function lockHeldError(holder: LockHolder, dataDir: string): LoopError {
  const who =
    holder.kind === 'run'
      ? `a \`the-loop run\` (pid ${holder.pid})`
      : `another the-loop daemon (pid ${holder.pid})`;
  return new LoopError('session-busy', `${who} is dispatching from ${dataDir}`, {
    hint:
      holder.kind === 'run'
        ? 'Wait for it to finish, then start the daemon.'
        : 'Stop it first, or give this one another --data-dir.',
  });
}

function readHolder(path: string): LockHolder | 'missing' | 'unreadable' {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return 'missing';
  }
  const [pid, kind] = text.trim().split(/\s+/);
  const n = Number(pid);
  if (!Number.isInteger(n) || n <= 0) return 'unreadable';
  return { pid: n, kind: kind === 'run' ? 'run' : 'daemon' };
}

/**
 * One dispatcher per data directory: the daemon holds `<dataDir>/dispatch.lock` for its lifetime;
 * `the-loop run` takes it only when nobody holds it. The lock file appears atomically with its
 * content (written aside, then hard-linked into place), so a reader never sees it empty. A holder
 * that is dead — or is this very process id from an earlier life (pid 1 in a container) — is stale.
 */
export function acquireLock(
  path: string,
  kind: LockHolder['kind'],
): { release: () => void } | { heldBy: LockHolder } {
  const aside = `${path}.${process.pid}.${Date.now()}`;
  writeFileSync(aside, `${process.pid} ${kind}\n`, { mode: 0o600 });
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        linkSync(aside, path);
        return {
          release: () => {
            const holder = readHolder(path);
            if (typeof holder === 'object' && holder.pid === process.pid) {
              try {
                unlinkSync(path);
              } catch {
                // Already gone.
              }
            }
          },
        };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const holder = readHolder(path);
      if (holder === 'missing') continue;
      if (holder === 'unreadable') {
        // Not ours to judge: an older writer, or a file edited by hand. Report it held by nobody known.
        return { heldBy: { pid: 0, kind: 'daemon' } };
      }
      if (holder.pid !== process.pid && pidAlive(holder.pid)) return { heldBy: holder };
      // Stale: remove it only if it is still the same stale file.
      const again = readHolder(path);
      if (typeof again === 'object' && again.pid === holder.pid) {
        try {
          unlinkSync(path);
        } catch {
          // Someone else cleared it first.
        }
      }
    }
    throw new Error(`cannot take the dispatcher lock ${path}`);
  } finally {
    try {
      unlinkSync(aside);
    } catch {
      // Nothing to clean.
    }
  }
}

/** Who holds the lock now, if that process is alive. */
export function currentHolder(path: string): LockHolder | null {
  const holder = readHolder(path);
  if (typeof holder !== 'object') return null;
  return holder.pid !== process.pid && pidAlive(holder.pid) ? holder : null;
}
