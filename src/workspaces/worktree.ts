import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../core/errors.js';

const git = (cwd: string, args: string[]) =>
  new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    execFile('git', args, { cwd, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error)
        reject(
          new LoopError(
            'internal',
            `git ${args[0]} failed: ${(stderr || error.message).trim().split('\n')[0]}`,
            { cause: error },
          ),
        );
      else resolve({ stdout, stderr });
    });
  });

/**
 * One git worktree per work item: `<dataDir>/worktrees/<slug>` on branch `loop/<slug>`, created from
 * the repository checkout. The slug is `[a-z0-9-]` only, so it is safe as a path and a branch name.
 */
export function worktreeDir(dataDir: string, slug: string): string {
  if (!/^[a-z0-9-]+$/.test(slug)) throw new LoopError('internal', `unsafe slug ${JSON.stringify(slug)}`);
  return join(dataDir, 'worktrees', slug);
}

export async function ensureWorktree(repoPath: string, dataDir: string, slug: string): Promise<string> {
  const dir = worktreeDir(dataDir, slug);
  if (existsSync(join(dir, '.git'))) return dir;
  if (!existsSync(repoPath)) {
    throw new LoopError('cwd-missing', `repository checkout not found: ${repoPath}`, {
      hint: 'Fix repos.<owner/name>.path in the config.',
    });
  }
  mkdirSync(join(dataDir, 'worktrees'), { recursive: true });
  const branch = `loop/${slug}`;
  const exists = await git(repoPath, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`]).then(
    () => true,
    () => false,
  );
  await git(repoPath, exists ? ['worktree', 'add', dir, branch] : ['worktree', 'add', '-b', branch, dir]);
  return dir;
}

/**
 * Remove a work item's worktree, unless it has commits not on any remote branch or uncommitted
 * changes: then it is kept and the reason returned.
 */
export async function removeWorktree(
  repoPath: string,
  dir: string,
): Promise<{ removed: boolean; reason?: string }> {
  if (!existsSync(dir)) return { removed: true };
  const status = await git(dir, ['status', '--porcelain']);
  if (status.stdout.trim()) return { removed: false, reason: 'it has uncommitted changes' };
  // Commits only this worktree's branch has: on no remote-tracking branch and no other local branch.
  const branch = (await git(dir, ['rev-parse', '--abbrev-ref', 'HEAD'])).stdout.trim();
  const unpushed = await git(dir, [
    'log',
    '--oneline',
    'HEAD',
    '--not',
    '--remotes',
    `--exclude=${branch}`,
    '--branches',
  ]).catch(() => ({ stdout: '' }));
  if (unpushed.stdout.trim()) {
    return {
      removed: false,
      reason: `it has ${unpushed.stdout.trim().split('\n').length} unpushed commit(s)`,
    };
  }
  await git(repoPath, ['worktree', 'remove', dir]);
  return { removed: true };
}
