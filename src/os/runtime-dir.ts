import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, rmdirSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { LoopError } from '../core/errors.js';
import { canonicalPath } from './canonical-path.js';

/**
 * Where a data dir's Unix sockets live (the keys sockets of PTY turns, the gateway's gh socket): not
 * in the data dir, whose path grows with HOME, the repository's name and the session's slug past the
 * 107 bytes (103 on macOS) a socket address holds, but in a short runtime directory, as tmux does:
 *
 *     <tmp>/the-loop-<uid>/<8 hex of the data dir>/
 *
 * `<tmp>` is TMPDIR when absolute, else /tmp. Not $XDG_RUNTIME_DIR: logind removes /run/user/<uid>
 * when the user's last login ends (a daemon started from a shell loses its sockets), and a system
 * service has none while the operator's shell has one (the CLI would look elsewhere than the daemon).
 *
 * /tmp is shared: every directory on the way is created 0700 and then checked — a real directory
 * (not a symlink), owned by us, mode 0700 — and one someone else made is refused, never used.
 */

/** Pure: `<tmp>/the-loop-<uid>`, one per user. */
export function runtimeRoot(env: Readonly<Record<string, string | undefined>>, uid: number): string {
  const tmp = env.TMPDIR && isAbsolute(env.TMPDIR) ? env.TMPDIR.replace(/(.)\/+$/, '$1') : '/tmp';
  return join(tmp, `the-loop-${uid}`);
}

/** Pure: the runtime directory of one data dir (give its canonical path): 8 hex of its digest. */
export function runtimeDirIn(root: string, dataDir: string): string {
  return join(root, createHash('sha256').update(dataDir).digest('hex').slice(0, 8));
}

/** Our uid (0 where the platform has none: such a platform has no Unix sockets to place). */
export const currentUid = (): number => process.getuid?.() ?? 0;

/** The runtime directory of a data dir, as the daemon and the CLI both compute it. */
export function runtimeDirOf(env: Readonly<Record<string, string | undefined>>, dataDir: string): string {
  return runtimeDirIn(runtimeRoot(env, currentUid()), canonicalPath(dataDir));
}

/** Why `dir` is not a private directory of ours, or null ('missing' when it does not exist). */
export function privateDirProblem(dir: string): string | null {
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    return `${dir} cannot be read: ${(error as Error).message}`;
  }
  if (stat.isSymbolicLink()) return `${dir} is a symbolic link`;
  if (!stat.isDirectory()) return `${dir} is not a directory`;
  if (stat.uid !== currentUid()) return `${dir} belongs to another user (uid ${stat.uid})`;
  if ((stat.mode & 0o777) !== 0o700) return `${dir} has mode ${(stat.mode & 0o777).toString(8)}, not 700`;
  return null;
}

/**
 * Create `dirs` in order (each the parent of the next, the first's parent existing) 0700, and check
 * each, created now or found. One that fails the check is an error naming it: it is never used.
 */
export function ensurePrivateDirs(dirs: readonly string[]): void {
  for (const dir of dirs) {
    try {
      mkdirSync(dir, { mode: 0o700 });
      // Made by us just now: the umask may have narrowed it further.
      chmodSync(dir, 0o700);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new LoopError('internal', `cannot create ${dir}: ${(error as Error).message}`, {
          cause: error,
        });
      }
    }
    const problem = privateDirProblem(dir);
    if (problem) {
      throw new LoopError('internal', `refusing the runtime directory ${dir}: ${problem}`, {
        hint: `It must be a directory of this user with mode 700 (the-loop creates it so). Remove it, or set TMPDIR to a directory of your own.`,
      });
    }
  }
}

/** The data dir's runtime directory and its root, created and checked; returns the directory. */
export function ensureRuntimeDir(env: Readonly<Record<string, string | undefined>>, dataDir: string): string {
  const dir = runtimeDirOf(env, dataDir);
  ensurePrivateDirs([runtimeRoot(env, currentUid()), dir]);
  return dir;
}

/** Remove `dir` when it is empty (best effort: in use by another process, it stays). */
export function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Not empty (another socket lives there), or gone already.
  }
}
