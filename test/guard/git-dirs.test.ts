/**
 * The git dirs a sandbox may bind writable: git names them, but from files the agent writes (a
 * worktree's `.git` file, `.git/commondir`); only the workspace's own and its configured
 * repository's are accepted, anything else refuses the turn.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { judgeGitDirs, trustedGitDirs } from '../../src/guard/git-dirs.js';
import { workspaceGitDirs } from '../../src/guard/sandbox-view.js';

const judge = (workspace: string, repository: string | undefined, ...dirs: string[]) =>
  judgeGitDirs({ workspace, repository, asked: dirs, resolved: dirs }).ok;

describe('judgeGitDirs (pure)', () => {
  const ws = '/data/worktrees/s';
  const repo = '/home/op/src/repo';
  it('accepts a git dir inside the workspace', () => {
    expect(judge(ws, undefined, `${ws}/.git`)).toBe(true);
    expect(judge(ws, repo, `${ws}/.git`, `${ws}/sub/.git`)).toBe(true);
  });
  it("accepts the repository's own .git and its worktrees/<name>", () => {
    expect(judge(ws, repo, `${repo}/.git`)).toBe(true);
    expect(judge(ws, repo, `${repo}/.git/worktrees/s`, `${repo}/.git`)).toBe(true);
  });
  it('refuses another repository, or anything under the repository but its git dirs', () => {
    expect(judge(ws, repo, '/home/op/src/other/.git')).toBe(false);
    expect(judge(ws, undefined, `${repo}/.git`)).toBe(false);
    expect(judge(ws, repo, `${repo}/.git/worktrees/s/deeper`)).toBe(false);
    expect(judge(ws, repo, `${repo}/.git/modules`)).toBe(false);
    expect(judge(ws, repo, repo)).toBe(false);
    expect(judge(ws, repo, `${repo}/.git-other`)).toBe(false);
    expect(judge(ws, repo, `${ws}-other/.git`)).toBe(false);
    expect(judge(ws, repo, '/')).toBe(false);
  });
  it('refuses `..` tricks and paths that are not canonical', () => {
    expect(judge(ws, repo, `${ws}/../other/.git`)).toBe(false);
    expect(judge(ws, repo, `${repo}/.git/worktrees/..`)).toBe(false);
    expect(judge(ws, repo, `${repo}/.git/worktrees/../../../other/.git`)).toBe(false);
    expect(judge(ws, repo, `${repo}/.git/`)).toBe(false);
    expect(judge(ws, repo, 'relative/.git')).toBe(false);
    expect(judge(`${ws}/..`, repo, `${ws}/.git`)).toBe(false);
  });
  it('judges where a path resolves, not what it says; one that does not resolve is refused', () => {
    const verdict = judgeGitDirs({
      workspace: ws,
      repository: repo,
      asked: [`${ws}/.git`],
      resolved: ['/home/op/src/other/.git'],
    });
    expect(verdict).toMatchObject({ ok: false, dir: `${ws}/.git` });
    expect(
      judgeGitDirs({ workspace: ws, repository: repo, asked: [`${ws}/.git`], resolved: [null] }).ok,
    ).toBe(false);
  });
});

let root: string;
beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-gitdirs-')));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

function repository(dir: string): void {
  mkdirSync(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, '-c', 'user.email=a@b', '-c', 'user.name=A', 'commit', '-q', '--allow-empty', '-m', 'one');
}

describe('trustedGitDirs (real repositories)', () => {
  it("accepts a worktree of the configured repository, and its checkout's own .git", async () => {
    const repo = join(root, 'repo');
    repository(repo);
    const wt = join(root, 'wt');
    git(repo, 'worktree', 'add', '-q', '-b', 'side', wt);
    expect(trustedGitDirs(wt, repo, await workspaceGitDirs(wt))).toEqual([
      join(repo, '.git', 'worktrees', 'wt'),
      join(repo, '.git'),
    ]);
    expect(trustedGitDirs(repo, repo, await workspaceGitDirs(repo))).toEqual([join(repo, '.git')]);
  });

  it("refuses a planted commondir, a rewritten worktree .git file, a .git symlinked to another's", async () => {
    const repo = join(root, 'repo');
    const other = join(root, 'other');
    repository(repo);
    repository(other);
    const wt = join(root, 'wt');
    git(repo, 'worktree', 'add', '-q', '-b', 'side', wt);
    // The agent plants another repository's git dir as its worktree's common dir.
    writeFileSync(join(repo, '.git', 'worktrees', 'wt', 'commondir'), `${join(other, '.git')}\n`);
    const planted = await workspaceGitDirs(wt);
    expect(planted).toContain(join(other, '.git'));
    expect(() => trustedGitDirs(wt, repo, planted)).toThrow(/refusing the turn.*other\/\.git/);
    // Or rewrites the worktree's .git file.
    writeFileSync(join(wt, '.git'), `gitdir: ${join(other, '.git')}\n`);
    expect(() => trustedGitDirs(wt, repo, [join(other, '.git')])).toThrow(/refusing the turn/);
    // Or, in a checkout, swaps .git for a link to another's: the link resolves outside.
    const ws = join(root, 'ws');
    mkdirSync(ws);
    symlinkSync(join(other, '.git'), join(ws, '.git'));
    const linked = await workspaceGitDirs(ws);
    expect(linked.length).toBeGreaterThan(0);
    expect(() => trustedGitDirs(ws, ws, linked)).toThrow(/refusing the turn/);
    expect(() => trustedGitDirs(ws, ws, [join(ws, '.git')])).toThrow(/resolves to/);
    expect(() => trustedGitDirs(ws, undefined, [join(ws, '.git')])).toThrow(/refusing the turn/);
  });
});
