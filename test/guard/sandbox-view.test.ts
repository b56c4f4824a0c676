/**
 * A session's sandbox as the guard plans it, run with the real bubblewrap: the agent commits in its
 * workspace but cannot change its repository's config or hooks, nor swap its `.git` for another —
 * what it planted there would run wherever git next runs in that repository. The daemon's own git
 * in such a repository runs jailed: a planted command cannot write outside it or reach a secret.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { gitJail } from '../../src/guard/git-jail.js';
import { sandboxPlan, workspaceGitDirs } from '../../src/guard/sandbox-view.js';
import { detectBwrap } from '../../src/sandbox/detect.js';
import { gitRunner } from '../../src/workspaces/git-runner.js';
import { ensureWorktree, removeWorktree } from '../../src/workspaces/worktree.js';

const bwrap = detectBwrap();
const SUITE = bwrap.available
  ? 'the guard’s sandbox (real bwrap)'
  : `SKIPPED: ${bwrap.available ? '' : bwrap.reason}`;
const REPO_ROOT = realpathSync(join(import.meta.dirname, '../..'));

let root: string;
beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-plan-')));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

function repository(dir: string): void {
  mkdirSync(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.email', 'a@example.test');
  git(dir, 'config', 'user.name', 'A');
  writeFileSync(join(dir, 'README.md'), 'one\n');
  git(dir, 'add', '.');
  git(dir, 'commit', '-q', '-m', 'one');
}

function planFor(
  workspace: string,
  dataDir: string,
  stateHome?: string,
  gitDirs?: readonly string[],
  repository?: string,
) {
  const state = join(dataDir, 'sessions', 's');
  mkdirSync(state, { recursive: true });
  const hooks = join(state, 'hooks.jsonl');
  writeFileSync(hooks, '');
  return sandboxPlan({
    workspace,
    stateDir: state,
    hookFiles: [hooks],
    dataDir,
    configPath: null,
    packageRoot: REPO_ROOT,
    binaryRoot: undefined,
    socketPath: undefined,
    engineWritable: [],
    engineEnv: { HOME: join(root, 'home') },
    operatorEnv: { HOME: join(root, 'home'), PATH: process.env.PATH, XDG_STATE_HOME: stateHome },
    config: configSchema.parse({}).sandbox,
    gitDirs,
    repository,
  });
}

/** A fixed shell script inside the sandbox (test code only); its output. */
function inside(argv: string[], script: string): string {
  const bw = bwrap.available ? bwrap.path : 'bwrap';
  const res = spawnSync(bw, [...argv, '/bin/sh', '-c', script], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' },
  });
  return `${res.stdout}${res.stderr}`;
}

describe('the workspace’s git dirs, asked ahead', () => {
  it('are what the plan asks itself: a repository, a worktree of one, a directory outside any', async () => {
    const repo = join(root, 'repo');
    repository(repo);
    const worktree = join(root, 'wt');
    git(repo, 'worktree', 'add', '-q', '-b', 'side', worktree);
    const plain = join(root, 'plain');
    mkdirSync(plain);
    for (const ws of [repo, worktree, plain]) {
      const asked = await workspaceGitDirs(ws);
      const dataDir = join(root, `data-${asked.length}`);
      expect(planFor(ws, dataDir, undefined, asked, repo).argv({ terminal: false })).toEqual(
        planFor(ws, dataDir, undefined, undefined, repo).argv({ terminal: false }),
      );
    }
    expect(await workspaceGitDirs(repo)).toEqual([join(repo, '.git')]);
    expect(await workspaceGitDirs(worktree)).toEqual([
      join(repo, '.git', 'worktrees', 'wt'),
      join(repo, '.git'),
    ]);
    expect(await workspaceGitDirs(plain)).toEqual([]);
  });

  it("refuse the plan when they name another repository's git dir (a planted commondir)", async () => {
    const repo = join(root, 'repo');
    const other = join(root, 'other');
    repository(repo);
    repository(other);
    const worktree = join(root, 'wt');
    git(repo, 'worktree', 'add', '-q', '-b', 'side', worktree);
    writeFileSync(join(repo, '.git', 'worktrees', 'wt', 'commondir'), `${join(other, '.git')}\n`);
    const asked = await workspaceGitDirs(worktree);
    expect(() => planFor(worktree, join(root, 'data'), undefined, asked, repo)).toThrow(/refusing the turn/);
    // Asked by the plan itself, the same.
    expect(() => planFor(worktree, join(root, 'data'), undefined, undefined, repo)).toThrow(
      /refusing the turn/,
    );
  });
});

describe.skipIf(!bwrap.available)(SUITE, () => {
  it('lets the agent commit, but not change its repository’s config or hooks, nor swap its .git', () => {
    const ws = join(root, 'ws');
    repository(ws);
    const plan = planFor(ws, join(root, 'data'));
    const out = inside(
      plan.argv({ terminal: false }),
      [
        'echo two >> README.md && git -c user.email=a@b -c user.name=A commit -qam two && echo COMMITTED',
        'echo "[core] fsmonitor = touch /tmp/pwned" >> .git/config && echo CONFIG-WRITTEN',
        'printf "#!/bin/sh\\ntouch pwned\\n" > .git/hooks/post-checkout && echo HOOK-WRITTEN',
        'mv .git .git-old && echo GIT-MOVED',
        'true',
      ].join('; '),
    );
    expect(out).toContain('COMMITTED');
    expect(out).not.toContain('CONFIG-WRITTEN');
    expect(out).not.toContain('HOOK-WRITTEN');
    expect(out).not.toContain('GIT-MOVED');
    expect(git(ws, 'log', '--oneline')).toMatch(/two/);
    expect(readFileSync(join(ws, '.git', 'config'), 'utf8')).not.toContain('fsmonitor');
    expect(existsSync(join(ws, '.git', 'hooks', 'post-checkout'))).toBe(false);
    expect(existsSync(join(ws, '.git-old'))).toBe(false);
  });

  it('hides every configuration’s state under the state home, not only its own', () => {
    const ws = join(root, 'ws');
    repository(ws);
    // Outside /tmp (the sandbox has a private one): as a state home under ~/.local/state is.
    const home = realpathSync(mkdtempSync('/var/tmp/the-loop-state-'));
    try {
      const states = join(home, 'the-loop');
      const own = join(states, 'ws-00000001');
      const other = join(states, 'other-00000002');
      mkdirSync(other, { recursive: true });
      writeFileSync(join(other, 'config.yaml'), 'webhookSecret: other-secret-canary\n');
      const plan = planFor(ws, own, home);
      const out = inside(
        plan.argv({ terminal: false }),
        `cat ${join(other, 'config.yaml')} || echo UNREADABLE`,
      );
      expect(out).not.toContain('other-secret-canary');
      expect(out).toContain('UNREADABLE');
      // The validated-config cache (it decides which binaries the daemon runs): out of reach too.
      const cache = join(states, 'config-cache');
      mkdirSync(cache, { recursive: true, mode: 0o700 });
      const planted = inside(
        plan.argv({ terminal: false }),
        `echo planted > ${join(cache, 'entry.bin')} && echo WRITTEN || echo DENIED`,
      );
      expect(planted).toContain('DENIED');
      expect(existsSync(join(cache, 'entry.bin'))).toBe(false);
      // The bwrap probe cache (a kept answer spares the probe): out of reach as well.
      const probes = join(states, 'probe-cache');
      mkdirSync(probes, { recursive: true, mode: 0o700 });
      const probe = inside(
        plan.argv({ terminal: false }),
        `echo planted > ${join(probes, 'bwrap-0.json')} && echo WRITTEN || echo DENIED`,
      );
      expect(probe).toContain('DENIED');
      expect(existsSync(join(probes, 'bwrap-0.json'))).toBe(false);
      // The session's own state dir stays visible (read-only), as before.
      const seen = inside(
        plan.argv({ terminal: false }),
        `test -d ${join(own, 'sessions', 's')} && echo SEEN`,
      );
      expect(seen).toContain('SEEN');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("runs the daemon's git jailed: a planted command writes nothing outside and sees no secret", async () => {
    const repo = join(root, 'repo');
    const dataDir = join(root, 'data');
    repository(repo);
    mkdirSync(dataDir, { recursive: true });
    const marker = join(root, 'marker');
    // As an agent without a sandbox could have planted it: git status runs the fsmonitor command.
    git(repo, 'config', 'core.fsmonitor', `env > ${join(repo, 'env.txt')}; touch ${marker}`);
    const env = { PATH: process.env.PATH, HOME: join(root, 'home'), GH_TOKEN: 'ghs_secret_of_the_daemon' };
    const jailed = gitRunner(
      env,
      gitJail({ bwrap: bwrap.available ? bwrap.path : 'bwrap', dataDir, configPath: null, env }),
    );
    const dir = await ensureWorktree(repo, dataDir, 'github-acme-x-1', jailed);
    expect(existsSync(join(dir, 'README.md'))).toBe(true);
    expect(await removeWorktree(repo, dir, jailed)).toEqual({ removed: true });
    // The planted command never ran (fsmonitor off on the command line) — and where it could, it
    // would have found no secret in git's environment and no writable place but the repository.
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(repo, 'env.txt'))).toBe(false);
  });
});
