import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { GitUpstream } from '../fixtures/git-upstream.js';

/** Run git (argv, no shell) in `cwd`; its trimmed stdout. */
export const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/**
 * A working repository on `main` whose `origin` is a local bare repository holding its first commit,
 * with one more local commit not pushed yet (what an agent would push, or a merge would land).
 */
export function repoWithRemote(root: string, name: string): { work: string; remote: string } {
  const work = join(root, name);
  const remote = join(root, `${name}-remote.git`);
  mkdirSync(work, { recursive: true });
  git(root, 'init', '-q', '--bare', '-b', 'main', remote);
  git(work, 'init', '-q', '-b', 'main');
  git(work, 'config', 'user.email', 'agent@example.test');
  git(work, 'config', 'user.name', 'Agent');
  writeFileSync(join(work, 'README.md'), 'one\n');
  git(work, 'add', 'README.md');
  git(work, 'commit', '-q', '-m', 'one');
  git(work, 'remote', 'add', 'origin', remote);
  git(work, 'push', '-q', 'origin', 'main');
  writeFileSync(join(work, 'README.md'), 'one\ntwo\n');
  git(work, 'commit', '-q', '-am', 'two');
  return { work, remote };
}

/** The commit a remote's branch points at. */
export const remoteHead = (remote: string, branch = 'main'): string =>
  git(remote, 'ls-remote', remote, `refs/heads/${branch}`).split(/\s/)[0] ?? '';

/** git that talks to an upstream this process serves: asynchronous, or the server could not answer. */
export const gitAsync = async (cwd: string, ...args: string[]): Promise<string> =>
  (await promisify(execFile)('git', args, { cwd, encoding: 'utf8' })).stdout.trim();

/**
 * A checkout of `owner/repo` at `dir` on main, its one commit pushed to `upstream` (a git
 * http-backend standing in for GitHub), its origin `https://github.com/<owner>/<repo>.git`: what an
 * engine pushes to goes through the gateway to `upstream`.
 */
export async function githubCheckout(
  upstream: Pick<GitUpstream, 'createRepo' | 'directGitConfig' | 'url'>,
  dir: string,
  owner: string,
  repo: string,
): Promise<string> {
  upstream.createRepo(owner, repo);
  mkdirSync(dir);
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.email', 'agent@example.test');
  git(dir, 'config', 'user.name', 'Agent');
  writeFileSync(join(dir, 'README.md'), 'one\n');
  git(dir, 'add', 'README.md');
  git(dir, 'commit', '-q', '-m', 'one');
  await gitAsync(
    dir,
    ...upstream.directGitConfig(),
    'push',
    '-q',
    `${upstream.url}/${owner}/${repo}.git`,
    'main',
  );
  git(dir, 'remote', 'add', 'origin', `https://github.com/${owner}/${repo}.git`);
  return dir;
}
