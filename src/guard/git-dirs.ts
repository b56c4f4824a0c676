import { realpathSync } from 'node:fs';
import { isAbsolute, join, posix } from 'node:path';
import { LoopError } from '../core/errors.js';

/**
 * Which git dirs a turn's sandbox may bind writable. git names them (rev-parse, asked of the
 * workspace), but the agent writes the workspace: a planted `.git/commondir` or a worktree's `.git`
 * file (`gitdir: /elsewhere/.git`) would have the next turn bind another repository's git dir
 * writable. So each is accepted only inside the workspace, or as the configured repository's own
 * `.git` or one of its `worktrees/<name>`; anything else refuses the turn (fail closed).
 */
export type GitDirVerdict = { ok: true } | { ok: false; dir: string; reason: string };

/** A path as realpath(3) gives it: absolute, no `.`/`..`, no trailing or doubled slash. */
const isCanonical = (path: string): boolean =>
  isAbsolute(path) && posix.normalize(path) === path && (path === '/' || !path.endsWith('/'));

const within = (path: string, base: string): boolean =>
  path === base || path.startsWith(base === '/' ? '/' : `${base}/`);

/**
 * The decision, over resolved paths (pure): `resolved[i]` is `asked[i]` after realpath, null when it
 * could not be resolved; `workspace` and `repository` are resolved too (repository: undefined when
 * the work item's repository is not configured).
 */
export function judgeGitDirs(input: {
  workspace: string;
  repository: string | undefined;
  asked: readonly string[];
  resolved: readonly (string | null)[];
}): GitDirVerdict {
  const { workspace, repository } = input;
  if (!isCanonical(workspace))
    return { ok: false, dir: workspace, reason: 'the workspace path is not canonical' };
  if (repository !== undefined && !isCanonical(repository)) {
    return { ok: false, dir: repository, reason: 'the repository path is not canonical' };
  }
  const repoGit = repository === undefined ? undefined : join(repository, '.git');
  for (const [i, dir] of input.asked.entries()) {
    const real = input.resolved[i];
    if (real === null || real === undefined) return { ok: false, dir, reason: 'it cannot be resolved' };
    if (!isCanonical(real)) return { ok: false, dir, reason: 'it does not resolve to a canonical path' };
    if (within(real, workspace)) continue;
    if (repoGit !== undefined && real === repoGit) continue;
    if (repoGit !== undefined && posix.dirname(real) === join(repoGit, 'worktrees')) continue;
    return {
      ok: false,
      dir,
      reason:
        real === dir
          ? 'it is neither inside the workspace nor the repository’s own .git'
          : `it resolves to ${real}, neither inside the workspace nor the repository’s own .git`,
    };
  }
  return { ok: true };
}

const realpathOrNull = (path: string): string | null => {
  try {
    return realpathSync.native(path);
  } catch {
    return null;
  }
};

/**
 * The workspace's git dirs that may be bound writable, resolved (what is checked is what is bound);
 * a LoopError refusing the turn when one may not.
 */
export function trustedGitDirs(
  workspace: string,
  repository: string | undefined,
  asked: readonly string[],
): string[] {
  const resolved = asked.map(realpathOrNull);
  const verdict = judgeGitDirs({
    workspace: realpathOrNull(workspace) ?? workspace,
    // A configured checkout that does not resolve vouches for nothing.
    repository: repository === undefined ? undefined : (realpathOrNull(repository) ?? undefined),
    asked,
    resolved,
  });
  if (!verdict.ok) {
    throw new LoopError(
      'internal',
      `refusing the turn: the workspace ${workspace} names the git dir ${verdict.dir}, and ${verdict.reason}`,
      {
        hint: `The agent may have rewritten .git/commondir or the worktree's .git file. Inspect and repair ${workspace}/.git (or close the session to drop its worktree); a workspace outside its configured repository (repos.<owner/name>.path) must hold its own .git.`,
      },
    );
  }
  return [...new Set(resolved.filter((d): d is string => d !== null))];
}
