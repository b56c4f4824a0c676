import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { LoopError } from '../core/errors.js';
import { type GitRunner, plainGit } from './git-runner.js';

/**
 * One git worktree per work item: `<dataDir>/worktrees/<slug>` on branch `loop/<slug>`, created from
 * the repository checkout. The slug is `[a-z0-9-]` only, so it is safe as a path and a branch name.
 */
export function worktreeDir(dataDir: string, slug: string): string {
  if (!/^[a-z0-9-]+$/.test(slug)) throw new LoopError('internal', `unsafe slug ${JSON.stringify(slug)}`);
  return join(dataDir, 'worktrees', slug);
}

export async function ensureWorktree(
  repoPath: string,
  dataDir: string,
  slug: string,
  git: GitRunner = plainGit,
): Promise<string> {
  const dir = worktreeDir(dataDir, slug);
  if (existsSync(join(dir, '.git'))) return dir;
  if (!existsSync(repoPath)) {
    throw new LoopError('cwd-missing', `repository checkout not found: ${repoPath}`, {
      hint: 'Fix repos.<owner/name>.path in the config.',
    });
  }
  mkdirSync(join(dataDir, 'worktrees'), { recursive: true });
  const branch = `loop/${slug}`;
  const exists = await git(repoPath, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], {
    readable: [repoPath],
  }).then(
    () => true,
    () => false,
  );
  // It writes the repository's git dir and the new worktree: nothing else.
  await git(repoPath, exists ? ['worktree', 'add', dir, branch] : ['worktree', 'add', '-b', branch, dir], {
    writable: [join(repoPath, '.git'), join(dataDir, 'worktrees')],
    readable: [repoPath],
  });
  return dir;
}

/**
 * Remove a work item's worktree, unless it has commits not on any remote branch or uncommitted
 * changes: then it is kept and the reason returned.
 */
export async function removeWorktree(
  repoPath: string,
  dir: string,
  git: GitRunner = plainGit,
): Promise<{ removed: boolean; reason?: string }> {
  if (!existsSync(dir)) return { removed: true };
  const view = { readable: [repoPath] };
  const status = await git(dir, ['status', '--porcelain'], view);
  if (status.stdout.trim()) return { removed: false, reason: 'it has uncommitted changes' };
  // Commits only this worktree's branch has: on no remote-tracking branch and no other local branch.
  const branch = (await git(dir, ['rev-parse', '--abbrev-ref', 'HEAD'], view)).stdout.trim();
  const unpushed = await git(
    dir,
    ['log', '--oneline', 'HEAD', '--not', '--remotes', `--exclude=${branch}`, '--branches'],
    view,
  ).catch(() => ({ stdout: '' }));
  if (unpushed.stdout.trim()) {
    return {
      removed: false,
      reason: `it has ${unpushed.stdout.trim().split('\n').length} unpushed commit(s)`,
    };
  }
  // Its parent writable, not the worktree itself: a mount point cannot be removed.
  await git(repoPath, ['worktree', 'remove', dir], {
    writable: [join(repoPath, '.git'), dirname(dir)],
    readable: [repoPath],
  });
  return { removed: true };
}
