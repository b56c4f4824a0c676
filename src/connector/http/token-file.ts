import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../../core/errors.js';
import { writePrivateFile } from '../../os/private-file.js';
import { pidAlive } from '../../os/proc.js';
import { privateDirProblem } from '../../os/runtime-dir.js';

/**
 * The bearer token of one `the-loop mcp --http` in a file only its user reads (`<dir>/<stem>.token`,
 * dir 0700, file 0600), for the client to read; the token is never printed. A lock beside it
 * (`<stem>.pid`) keeps a second server of the same grant from overwriting the first one's token —
 * and the first from removing the second's when it stops; a lock whose process is gone (killed
 * before it could clean up) is taken over.
 */

export interface TokenFile {
  path: string;
  /** Remove the token and the lock (idempotent; what another server claimed since is left alone). */
  remove(): void;
}

function privateDir(dir: string): void {
  try {
    mkdirSync(dir, { mode: 0o700 });
    // Made by us just now: the umask may have narrowed it further, never widened it.
    chmodSync(dir, 0o700);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST')
      throw new LoopError('internal', `cannot create ${dir}: ${(error as Error).message}`, { cause: error });
  }
  const problem = privateDirProblem(dir);
  if (problem)
    throw new LoopError('internal', `refusing the token directory ${dir}: ${problem}`, {
      hint: 'It must be a directory of this user with mode 700 (the-loop creates it so): remove it and start again.',
    });
}

const readPid = (path: string): number | null => {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
};

/** Take the lock, or say which live server holds it. */
function lock(path: string, tokenPath: string, pid: number): void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, String(pid), { flag: 'wx', mode: 0o600 });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readPid(path);
    if (holder !== null && holder !== pid && pidAlive(holder))
      throw new LoopError(
        'usage',
        `another \`the-loop mcp --http\` (pid ${holder}) already serves this grant; its token is in ${tokenPath}`,
        { hint: 'use that server (it takes up to 16 sessions), stop it, or narrow this one differently' },
      );
    // Its process is gone: what it left behind is stale.
    rmSync(tokenPath, { force: true });
    rmSync(path, { force: true });
  }
  throw new LoopError('internal', `cannot take the lock ${path}: another process keeps recreating it`);
}

export function claimTokenFile(dir: string, stem: string, token: string, pid = process.pid): TokenFile {
  privateDir(dir);
  const lockPath = join(dir, `${stem}.pid`);
  const path = join(dir, `${stem}.token`);
  lock(lockPath, path, pid);
  try {
    writePrivateFile(dir, `${stem}.token`, token);
  } catch (error) {
    rmSync(lockPath, { force: true });
    throw error;
  }
  let removed = false;
  return {
    path,
    remove: () => {
      if (removed) return;
      removed = true;
      // Ours while our pid is in the lock: a server that took a lock we lost is not undone.
      if (readPid(lockPath) !== pid) return;
      rmSync(path, { force: true });
      rmSync(lockPath, { force: true });
    },
  };
}
