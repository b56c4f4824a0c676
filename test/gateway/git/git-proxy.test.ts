/**
 * The git smart HTTP proxy with the real git client, through a tiny gateway (git-harness.ts) to a
 * real `git http-backend` upstream (fixtures/git-upstream.ts): the merge policy enforced on every
 * spelling of a push that reaches main, pushes that land, fetches and clones, the session's
 * repository only, the upstream's own refusals, thousands of refs and a large pack.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Policy } from '../../../src/acts/decide.js';
import { resolvePolicy } from '../../../src/acts/policy.js';
import { createGitHandler } from '../../../src/gateway/git/git-proxy.js';
import type { GatewayHandler } from '../../../src/gateway/types.js';
import { type GitUpstream, startGitUpstream } from '../../fixtures/git-upstream.js';
import { git } from '../../helpers/git.js';
import { type Harness, runGit, startHarness, TEST_TOKEN } from '../git-harness.js';

const strict = resolvePolicy(undefined, undefined, 'main');
const permissive = resolvePolicy(
  undefined,
  { acts: { 'git-push': 'allow', 'git-delete-branch': 'allow' } },
  'main',
);

let root: string;
let upstream: GitUpstream;
let harness: Harness | undefined;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-git-proxy-'));
  upstream = await startGitUpstream();
});

afterEach(async () => {
  if (harness) {
    await harness.settled();
    expect(harness.errors).toEqual([]);
    // Neither credential ever reaches a log line.
    expect(harness.logs.join('\n')).not.toContain(TEST_TOKEN);
    expect(harness.logs.join('\n')).not.toContain(upstream.token);
    await harness.close();
  }
  harness = undefined;
  await upstream.close();
  rmSync(root, { recursive: true, force: true });
});

interface Setup {
  h: Harness;
  work: string;
  /** The commit the upstream's main holds (seeded over the file system). */
  one: string;
  /** The local commit not pushed yet. */
  two: string;
  run: (...args: string[]) => ReturnType<typeof runGit>;
}

/** An upstream `acme/demo` whose main holds one commit, and a work repository one commit ahead whose origin is the gateway. */
async function setup(policy: Policy, handler?: GatewayHandler): Promise<Setup> {
  const bare = upstream.createRepo('acme', 'demo');
  const h = await startHarness({
    gitUrl: upstream.url,
    upstreamToken: upstream.token,
    policy,
    home: root,
    handler,
  });
  harness = h;
  const work = join(root, 'work');
  git(root, 'init', '-q', '-b', 'main', work);
  git(work, 'config', 'user.email', 'agent@example.test');
  git(work, 'config', 'user.name', 'Agent');
  writeFileSync(join(work, 'README.md'), 'one\n');
  git(work, 'add', 'README.md');
  git(work, 'commit', '-q', '-m', 'one');
  git(work, 'push', '-q', bare, 'main');
  writeFileSync(join(work, 'README.md'), 'one\ntwo\n');
  git(work, 'commit', '-q', '-am', 'two');
  git(work, 'remote', 'add', 'origin', h.remote('acme', 'demo'));
  return {
    h,
    work,
    one: git(work, 'rev-parse', 'HEAD~1'),
    two: git(work, 'rev-parse', 'HEAD'),
    run: (...args) => runGit(work, h.gitEnv, ...args),
  };
}

describe('the default policy at the wire', () => {
  it('refuses every spelling of a push that reaches main (or a tag), and main stays where it was', async () => {
    const { h, work, one, run } = await setup(strict);
    git(work, 'tag', 'v1');
    const spellings = [
      ['push', 'origin', 'main'],
      ['push', 'origin', 'HEAD:main'],
      ['push', 'origin', 'HEAD:refs/heads/main'],
      ['-c', 'remote.origin.push=HEAD:refs/heads/main', 'push', 'origin'],
      [
        '-c',
        'push.default=upstream',
        '-c',
        'branch.main.remote=origin',
        '-c',
        'branch.main.merge=refs/heads/main',
        'push',
      ],
      ['push', '--force', 'origin', 'main'],
      ['push', 'origin', '+HEAD:main'],
      ['push', 'origin', ':main'],
      ['push', 'origin', '--delete', 'main'],
      ['push', '--all', 'origin'],
      ['push', '--mirror', 'origin'],
      ['push', 'origin', 'v1'],
      ['push', '--tags', 'origin'],
      ['push', 'origin', 'HEAD:refs/tags/v2'],
    ];
    for (const args of spellings) {
      const before = h.acts.length;
      const r = await run(...args);
      await h.settled();
      const label = args.join(' ');
      expect(r.code, label).not.toBe(0);
      expect(r.stderr, label).toContain('[the-loop policy]');
      const fresh = h.acts.slice(before);
      expect(fresh.length, label).toBeGreaterThan(0);
      expect(
        fresh.some((a) => a.outcome === 'blocked' && /^refs\/(heads\/main|tags\/)/.test(a.detail.ref ?? '')),
        label,
      ).toBe(true);
      expect(
        fresh.every((a) => a.outcome === 'blocked' || (a.outcome === 'failed' && a.verdict === 'allow')),
      ).toBe(true);
      expect(upstream.refs('acme', 'demo'), label).toEqual({ 'refs/heads/main': one });
    }
    const first = await run('push', 'origin', 'main');
    expect(first.stderr).toContain(
      '! [remote rejected] main -> main ([the-loop policy] pushing to the protected branch main is not allowed in this repository)',
    );
    const blocked = h.acts.find((a) => a.detail.ref === 'refs/heads/main' && a.kind === 'git-delete-branch');
    expect(blocked).toMatchObject({
      outcome: 'blocked',
      verdict: 'deny',
      rule: 'git-delete-branch: deny-protected',
    });
    expect(h.acts.find((a) => a.kind === 'git-push-tags')).toMatchObject({
      outcome: 'blocked',
      rule: 'git-push-tags: deny',
    });
    // Refused before a byte of any push reached the upstream.
    expect(upstream.requests.filter((r) => r.method === 'POST')).toEqual([]);
  });

  it('lets a feature branch land and be deleted, and refuses a push that mixes it with main whole', async () => {
    const { h, two, one, run } = await setup(strict);
    const landed = await run('push', 'origin', 'HEAD:feature');
    expect(landed.code, landed.stderr).toBe(0);
    expect(upstream.refs('acme', 'demo')).toEqual({ 'refs/heads/main': one, 'refs/heads/feature': two });
    await h.settled();
    expect(h.acts).toEqual([
      {
        kind: 'git-push',
        command: 'git-receive-pack refs/heads/feature',
        detail: {
          via: 'git-receive-pack',
          ref: 'refs/heads/feature',
          oldOid: '0'.repeat(40),
          newOid: two,
          branches: ['feature'],
          upstream: 'ok',
        },
        outcome: 'succeeded',
        verdict: 'allow',
        rule: 'git-push: deny-protected',
      },
    ]);

    const mixed = await run('push', 'origin', 'HEAD:refs/heads/side', 'main');
    expect(mixed.code).not.toBe(0);
    expect(mixed.stderr).toContain('another ref of the same push was refused');
    expect(upstream.refs('acme', 'demo')['refs/heads/side']).toBeUndefined();
    await h.settled();
    // git sends the updates in ref order.
    expect(h.acts.slice(1).map((a) => [a.detail.ref, a.outcome])).toEqual([
      ['refs/heads/main', 'blocked'],
      ['refs/heads/side', 'failed'],
    ]);

    const deleted = await run('push', 'origin', '--delete', 'feature');
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(upstream.refs('acme', 'demo')).toEqual({ 'refs/heads/main': one });
    await h.settled();
    expect(h.acts.at(-1)).toMatchObject({
      kind: 'git-delete-branch',
      outcome: 'succeeded',
      detail: { branches: ['feature'] },
    });
  });
});

describe('a permissive policy', () => {
  it('lets the push to main land; the upstream still refuses to delete its current branch', async () => {
    const { h, two, run } = await setup(permissive);
    const r = await run('push', 'origin', 'main');
    expect(r.code, r.stderr).toBe(0);
    expect(upstream.refs('acme', 'demo')).toEqual({ 'refs/heads/main': two });
    const del = await run('push', 'origin', '--delete', 'main');
    expect(del.code).not.toBe(0);
    expect(del.stderr).toContain('deletion of the current branch prohibited');
    await h.settled();
    expect(h.acts.map((a) => [a.kind, a.outcome, a.verdict, a.detail.upstream])).toEqual([
      ['git-push', 'succeeded', 'allow', 'ok'],
      ['git-delete-branch', 'failed', 'allow', 'ng deletion of the current branch prohibited'],
    ]);
    expect(upstream.refs('acme', 'demo')).toEqual({ 'refs/heads/main': two });
  });
});

describe('the upstream refusing a push', () => {
  it('settles it failed with the upstream reason: a pre-receive hook, a non-fast-forward', async () => {
    const { h, work, run } = await setup(strict);
    upstream.setHook(
      'acme',
      'demo',
      'pre-receive',
      "process.stderr.write('no pushes on fridays\\n'); process.exit(1);",
    );
    const hooked = await run('push', 'origin', 'HEAD:feature');
    expect(hooked.code).not.toBe(0);
    expect(hooked.stderr).toContain('remote: no pushes on fridays'); // band-2 progress passed through
    expect(hooked.stderr).toContain('[remote rejected] HEAD -> feature (pre-receive hook declined)');
    rmSync(join(upstream.repoPath('acme', 'demo'), 'hooks', 'pre-receive'));

    git(upstream.repoPath('acme', 'demo'), 'config', 'receive.denyNonFastForwards', 'true');
    expect((await run('push', 'origin', 'HEAD:feature')).code).toBe(0);
    git(work, 'commit', '-q', '--amend', '-m', 'rewritten');
    const forced = await run('push', '--force', 'origin', 'HEAD:feature');
    expect(forced.code).not.toBe(0);
    expect(forced.stderr).toContain('[remote rejected] HEAD -> feature (non-fast-forward)');
    await h.settled();
    expect(h.acts.map((a) => [a.outcome, a.detail.upstream])).toEqual([
      ['failed', 'ng pre-receive hook declined'],
      ['succeeded', 'ok'],
      ['failed', 'ng non-fast-forward'],
    ]);
  });
});

describe('fetches', () => {
  it('clone, fetch (protocol v2 and v0) and ls-remote pass through, with only the real credential upstream', async () => {
    const { h, one, run } = await setup(strict);
    const clone = await runGit(root, h.gitEnv, 'clone', '-q', h.remote('acme', 'demo'), 'clone');
    expect(clone.code, clone.stderr).toBe(0);
    expect(git(join(root, 'clone'), 'rev-parse', 'HEAD')).toBe(one);
    expect((await run('-c', 'protocol.version=0', 'fetch', '-q', 'origin')).code).toBe(0);
    expect(git(join(root, 'work'), 'rev-parse', 'origin/main')).toBe(one);
    const ls = await run('ls-remote', 'origin');
    expect(ls.stdout).toContain(`${one}\trefs/heads/main`);
    expect(upstream.requests.length).toBeGreaterThan(3);
    for (const r of upstream.requests) {
      expect(r.authorized).toBe(true);
      expect(JSON.stringify(r.headers)).not.toContain(TEST_TOKEN);
    }
    expect(upstream.requests.some((r) => r.headers['git-protocol'] === 'version=2')).toBe(true);
    expect(h.acts).toEqual([]);
  });
});

describe('the session repository only', () => {
  it('refuses another repository with 403 and a message git shows; case and .git do not matter', async () => {
    const { h, run } = await setup(strict);
    const other = await run('ls-remote', h.remote('other', 'repo'));
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain(
      'remote: [the-loop gateway] this session may reach only the repository acme/demo',
    );
    expect(other.stderr).toContain('403');
    expect(upstream.requests.some((r) => r.path.includes('other'))).toBe(false);
    expect((await run('ls-remote', h.remote('ACME', 'Demo'))).code).toBe(0);
    expect((await run('ls-remote', `${h.url}/git/acme/demo`)).code).toBe(0);
  });

  it('serves only the smart HTTP endpoints', async () => {
    const { h } = await setup(strict);
    const headers = { authorization: `Bearer ${TEST_TOKEN}` };
    const at = (path: string, method = 'GET') =>
      fetch(`${h.url}/git/acme/demo.git/${path}`, { method, headers });
    expect((await at('HEAD')).status).toBe(404);
    expect((await at('objects/info/packs')).status).toBe(404);
    expect((await at('info/refs')).status).toBe(404);
    expect((await at('info/refs?service=git-upload-archive')).status).toBe(404);
    const wrong = await at('git-receive-pack');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect((await at('info/refs?service=git-upload-pack', 'POST')).status).toBe(405);
    expect((await fetch(`${h.url}/git/acme%2Fdemo.git/x/info/refs`, { headers })).status).toBe(404);
    // A dot-segment is resolved by the client before it is sent: it names another repository.
    expect((await fetch(`${h.url}/git/acme/../other/x.git/info/refs`, { headers })).status).toBe(403);
    expect(upstream.requests).toEqual([]);
  });
});

describe('big pushes', () => {
  const makeBranches = (work: string, n: number) => {
    const lines = Array.from(
      { length: n },
      (_, i) => `create refs/heads/many/b${String(i).padStart(4, '0')} HEAD\n`,
    );
    execFileSync('git', ['update-ref', '--stdin'], { cwd: work, input: lines.join('') });
  };

  it('pushes 3,000 branches in one push, each recorded', async () => {
    const { h, work, run } = await setup(strict);
    makeBranches(work, 3000);
    const r = await run('push', '-q', 'origin', 'refs/heads/many/*:refs/heads/many/*');
    expect(r.code, r.stderr).toBe(0);
    expect(Object.keys(upstream.refs('acme', 'demo'))).toHaveLength(3001);
    await h.settled();
    expect(h.acts).toHaveLength(3000);
    expect(h.acts.every((a) => a.outcome === 'succeeded' && a.kind === 'git-push')).toBe(true);
  });

  it('refuses clearly a push over the cap on ref updates, forwarding nothing', async () => {
    const handler = createGitHandler({ headLimits: { commands: 1000, bytes: 4 * 1024 * 1024 } });
    const { h, work, run, one } = await setup(strict, handler);
    makeBranches(work, 1500);
    const r = await run('push', '-q', 'origin', 'refs/heads/many/*:refs/heads/many/*');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('more than 1000 ref updates in one push: push them in smaller batches');
    expect(upstream.refs('acme', 'demo')).toEqual({ 'refs/heads/main': one });
    expect(upstream.requests.filter((q) => q.method === 'POST')).toEqual([]);
    await h.settled();
    expect(h.acts).toMatchObject([{ kind: 'truncated-input', outcome: 'blocked', rule: 'gateway: limit' }]);
  });

  it('streams a 100+ MB pack through with bounded memory', async () => {
    const { h, work, run } = await setup(strict);
    const fd = openSync(join(work, 'big.bin'), 'w');
    for (let i = 0; i < 105; i++) writeSync(fd, randomBytes(1024 * 1024));
    closeSync(fd);
    git(work, '-c', 'core.compression=0', 'add', 'big.bin');
    git(work, 'commit', '-q', '-m', 'big');
    const head = git(work, 'rev-parse', 'HEAD');
    const base = process.memoryUsage().rss;
    let peak = base;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 50);
    const r = await run('-c', 'pack.compression=0', 'push', '-q', 'origin', 'HEAD:big');
    clearInterval(sampler);
    expect(r.code, r.stderr).toBe(0);
    expect(upstream.refs('acme', 'demo')['refs/heads/big']).toBe(head);
    const posted = upstream.requests.find((q) => q.method === 'POST' && q.bodyBytes > 100 * 1024 * 1024);
    expect(posted?.headers['transfer-encoding']).toBe('chunked');
    await h.settled();
    expect(h.acts).toMatchObject([{ detail: { ref: 'refs/heads/big' }, outcome: 'succeeded' }]);
    const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
    console.log(
      `[git proxy] 105 MB push: test process RSS ${mb(base)} → peak ${mb(peak)} (growth ${mb(peak - base)})`,
    );
  });
});
