import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureWorktree, removeWorktree, worktreeDir } from '../../src/workspaces/worktree.js';

const env = {
  ...process.env,
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.com',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.com',
};
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, env, encoding: 'utf8' }).trim();

describe('per-work-item git worktrees', () => {
  let root: string;
  let repo: string;
  let data: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-wt-'));
    const remote = join(root, 'remote.git');
    repo = join(root, 'repo');
    data = join(root, 'data');
    git(root, 'init', '-q', '--bare', '-b', 'main', remote);
    mkdirSync(repo);
    git(repo, 'init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'README.md'), 'hi\n');
    git(repo, 'add', '.');
    git(repo, 'commit', '-qm', 'init');
    git(repo, 'remote', 'add', 'origin', remote);
    git(repo, 'push', '-q', 'origin', 'main');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('creates the worktree on branch loop/<slug>, and reuses it', async () => {
    const dir = await ensureWorktree(repo, data, 'github-acme-widgets-15');
    expect(dir).toBe(worktreeDir(data, 'github-acme-widgets-15'));
    expect(git(dir, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('loop/github-acme-widgets-15');
    expect(await ensureWorktree(repo, data, 'github-acme-widgets-15')).toBe(dir);
  });

  it('keeps a worktree with uncommitted changes or unpushed commits, and says why', async () => {
    const dir = worktreeDir(data, 'github-acme-widgets-15');
    writeFileSync(join(dir, 'work.txt'), 'draft\n');
    expect(await removeWorktree(repo, dir)).toEqual({ removed: false, reason: 'it has uncommitted changes' });
    git(dir, 'add', '.');
    git(dir, 'commit', '-qm', 'work');
    expect(await removeWorktree(repo, dir)).toEqual({
      removed: false,
      reason: 'it has 1 unpushed commit(s)',
    });
    expect(existsSync(dir)).toBe(true);
    git(dir, 'push', '-q', 'origin', 'HEAD');
    expect(await removeWorktree(repo, dir)).toEqual({ removed: true });
    expect(existsSync(dir)).toBe(false);
  });

  it('refuses slugs that could escape the worktrees directory', () => {
    expect(() => worktreeDir(data, '../etc')).toThrow(/unsafe slug/);
    expect(() => worktreeDir(data, 'a/b')).toThrow(/unsafe slug/);
  });

  it('reports a missing checkout clearly', async () => {
    await expect(ensureWorktree(join(root, 'nope'), data, 'github-acme-widgets-16')).rejects.toThrow(
      /repository checkout not found/,
    );
  });
});
