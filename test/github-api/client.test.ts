/**
 * The GitHub client against a fake GitHub on real HTTP: the App's JWT (verified with the App's
 * public key), installation tokens minted once, reused and minted again as the injected clock
 * passes their expiry (no sleeping), installations from payloads or asked of GitHub, refusals as
 * GitHubCallError values, rate limits waited out, 5xx retried, writes paced, and token mode.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LoopError } from '../../src/core/errors.js';
import { GitHubCallError } from '../../src/core/ports/github.js';
import { createGitHubClient, type GitHubClientOptions } from '../../src/github-api/client.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { type FakeAppAuth, startFakeAppAuth, testAppKey } from '../helpers/fake-app-auth.js';

const APP_ID = 4242;
const REPO = { owner: 'acme', repo: 'demo' };
let key: ReturnType<typeof testAppKey>;
const fakes: FakeAppAuth[] = [];
const clients: Array<{ close(): void }> = [];

beforeAll(() => {
  key = testAppKey();
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

async function fake(options: { expiresAt?: () => string } = {}): Promise<FakeAppAuth> {
  const f = await startFakeAppAuth({ appId: APP_ID, publicKey: key.publicKey, ...options });
  fakes.push(f);
  return f;
}

function client(f: FakeAppAuth, extra: Partial<GitHubClientOptions> = {}) {
  const sink = memorySink();
  const c = createGitHubClient({
    baseUrl: f.url,
    auth: { kind: 'app', appId: APP_ID, privateKey: key.privateKey },
    pacing: { writeGapMs: 10, commentGapMs: 10 },
    logger: createLogger({ level: 'debug', sinks: [sink] }),
    userAgent: 'the-loop-test',
    retryBaseMs: 5,
    ...extra,
  });
  clients.push(c);
  return { client: c, logs: sink.lines };
}

const writes = (f: FakeAppAuth) => f.requests.filter((r) => r.path.includes('/issues/'));

describe('GitHub App auth', () => {
  it('signs its JWT with the App key and mints an installation token once, reused until near expiry', async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const f = await fake({ expiresAt: () => new Date(now + 3_600_000).toISOString() });
    f.installations.add(7);
    f.repoInstallations.set('acme/demo', 7);
    const { client: c } = client(f, { now: () => now });

    await c.createComment(REPO, 1, 'one');
    now += 30 * 60_000;
    await c.createComment(REPO, 1, 'two');
    expect(f.minted).toHaveLength(1);
    // Within five minutes of expiry: a new one, without waiting for anything.
    now += 26 * 60_000;
    await c.createComment(REPO, 1, 'three');
    expect(f.minted).toHaveLength(2);
    const auths = writes(f).map((r) => r.authorization);
    expect(auths).toEqual([
      `token ${f.minted[0]?.token}`,
      `token ${f.minted[0]?.token}`,
      `token ${f.minted[1]?.token}`,
    ]);
    expect(f.badJwts).toEqual([]);
    // The repository's installation was asked once, with the JWT.
    expect(f.requests.filter((r) => r.path === '/repos/acme/demo/installation')).toHaveLength(1);
  });

  it('uses the installation a payload named before asking GitHub', async () => {
    const f = await fake();
    f.installations.add(9);
    const { client: c } = client(f);
    c.noteInstallation('Acme/Demo', 9);
    await c.react(REPO, { kind: 'issue', number: 3 }, 'eyes');
    expect(f.minted.map((m) => m.installationId)).toEqual([9]);
    expect(f.requests.some((r) => r.path.endsWith('/installation'))).toBe(false);
    // A RepoRef naming its installation wins.
    f.installations.add(11);
    await c.react({ ...REPO, installationId: 11 }, { kind: 'issue-comment', id: 5 }, 'eyes');
    expect(f.minted.map((m) => m.installationId)).toEqual([9, 11]);
    expect(f.requests.at(-1)?.path).toBe('/repos/acme/demo/issues/comments/5/reactions');
  });

  it('mints again once when GitHub refuses an installation token (401)', async () => {
    const f = await fake();
    f.installations.add(7);
    const { client: c, logs } = client(f, {
      auth: { kind: 'app', appId: APP_ID, privateKey: key.privateKey, installationId: 7 },
    });
    await c.updateComment(REPO, 5, 'a');
    f.validTokens.clear();
    await c.updateComment(REPO, 5, 'b');
    expect(f.minted).toHaveLength(2);
    expect(writes(f).at(-1)?.authorization).toBe(`token ${f.minted[1]?.token}`);
    expect(logs.some((l) => l.includes('minting another'))).toBe(true);
  });

  it('says plainly when the installation is gone, and asks again next time', async () => {
    const f = await fake();
    f.repoInstallations.set('acme/demo', 7);
    const { client: c } = client(f);
    const failed = await c.createComment(REPO, 1, 'x').catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(GitHubCallError);
    expect((failed as GitHubCallError).status).toBe(404);
    expect((failed as GitHubCallError).message).toMatch(/installation 7 is gone/);
    // Reinstalled under another id: the dropped entry lets the lookup find it.
    f.repoInstallations.set('acme/demo', 8);
    f.installations.add(8);
    await c.createComment(REPO, 1, 'y');
    expect(f.minted.map((m) => m.installationId)).toEqual([8]);
    f.repoInstallations.clear();
    const other = await c.createComment({ owner: 'acme', repo: 'other' }, 1, 'z').catch((e: unknown) => e);
    expect((other as GitHubCallError).message).toMatch(/not installed on acme\/other/);
  });

  it('tells the gateway the installation token for a repository', async () => {
    const f = await fake();
    f.installations.add(7);
    f.repoInstallations.set('acme/demo', 7);
    const { client: c, logs } = client(f);
    const token = await c.tokenFor('acme/demo');
    expect(token).toBe(f.minted[0]?.token);
    expect(await c.tokenFor('acme/demo')).toBe(token);
    // The gateway saw GitHub refuse it: the next request gets a fresh one.
    c.tokenRefused('acme/demo');
    expect(await c.tokenFor('acme/demo')).toBe(f.minted[1]?.token);
    expect(f.minted).toHaveLength(2);
    expect(await c.tokenFor('acme/nowhere')).toBeUndefined();
    expect(logs.some((l) => l.includes('no GitHub App installation token'))).toBe(true);
  });

  it('says who it was configured as when GitHub cannot tell (logged once), and asks again later', async () => {
    const f = await fake();
    const refusal = { status: 401, body: { message: 'Bad credentials' } };
    f.script('GET /app', refusal, refusal);
    const configured = client(f, { botLogin: 'loop-bot[bot]' });
    expect(await configured.client.identity()).toEqual({ login: 'loop-bot[bot]', appId: APP_ID });
    const { client: c, logs } = client(f);
    expect(await c.identity()).toEqual({ login: undefined, appId: APP_ID });
    expect(logs.filter((l) => l.includes('could not learn who we are'))).toHaveLength(1);
    expect(await c.identity()).toEqual({ login: 'the-loop-test[bot]', appId: APP_ID });
    expect(logs.filter((l) => l.includes('could not learn who we are'))).toHaveLength(1);
  });

  it('learns who it is from GET /app, once', async () => {
    const f = await fake();
    const { client: c } = client(f);
    expect(await c.identity()).toEqual({ login: 'the-loop-test[bot]', appId: APP_ID });
    await c.identity();
    expect(f.requests.filter((r) => r.path === '/app')).toHaveLength(1);
    expect(c.mode).toBe('app');
  });

  it('refuses a private key that does not parse, without quoting it', async () => {
    const f = await fake();
    const secret = 'not-a-key-but-secret-material-0123456789';
    let failed: unknown;
    try {
      client(f, { auth: { kind: 'app', appId: APP_ID, privateKey: secret, installationId: 7 } });
    } catch (error) {
      failed = error;
    }
    expect(failed).toBeInstanceOf(LoopError);
    expect((failed as LoopError).message).toBe('github.app.privateKey is not a PEM RSA private key');
    expect(JSON.stringify({ ...(failed as LoopError), m: (failed as Error).message })).not.toContain(secret);
    expect(f.requests).toEqual([]);
  });
});

describe('GitHub calls', () => {
  it('waits out a secondary rate limit and succeeds', async () => {
    const f = await fake();
    f.installations.add(7);
    f.repoInstallations.set('acme/demo', 7);
    f.script('PATCH /repos/acme/demo/issues/comments/5', {
      status: 403,
      headers: { 'retry-after': '1' },
      body: {
        message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
      },
    });
    const { client: c, logs } = client(f);
    await c.updateComment(REPO, 5, 'body');
    expect(writes(f)).toHaveLength(2);
    expect(logs.some((l) => l.includes('secondary rate limit') && l.includes('"retryAfter":1'))).toBe(true);
  });

  it('gives up after three rate-limit waits: a GitHubCallError 403', async () => {
    const f = await fake();
    f.installations.add(7);
    f.repoInstallations.set('acme/demo', 7);
    const limited = {
      status: 403,
      headers: { 'retry-after': '1' },
      body: { message: 'You have exceeded a secondary rate limit.' },
    };
    f.script('PATCH /repos/acme/demo/issues/comments/5', limited, limited, limited, limited);
    const { client: c } = client(f);
    const failed = (await c.updateComment(REPO, 5, 'x').catch((e: unknown) => e)) as GitHubCallError;
    expect(failed).toBeInstanceOf(GitHubCallError);
    expect(failed.status).toBe(403);
    expect(failed.message).toMatch(
      /^GitHub answered 403 on PATCH \/repos\/acme\/demo\/issues\/comments\/5: You have exceeded/,
    );
    expect(writes(f)).toHaveLength(4);
  });

  it('retries a 5xx, then succeeds', async () => {
    const f = await fake();
    f.installations.add(7);
    f.repoInstallations.set('acme/demo', 7);
    f.script('POST /repos/acme/demo/issues/2/comments', { status: 502, body: { message: 'Bad Gateway' } });
    const { client: c } = client(f);
    expect(await c.createComment(REPO, 2, 'hi')).toEqual({ id: expect.any(Number) });
    expect(writes(f)).toHaveLength(2);
  });

  it.each([404, 422])(
    'does not retry a %i: a GitHubCallError with the status and the route',
    async (status) => {
      const f = await fake();
      f.installations.add(7);
      f.repoInstallations.set('acme/demo', 7);
      f.script('PATCH /repos/acme/demo/issues/comments/5', { status, body: { message: 'Nope' } });
      const { client: c } = client(f);
      const failed = (await c.updateComment(REPO, 5, 'x').catch((e: unknown) => e)) as GitHubCallError;
      expect(failed).toBeInstanceOf(GitHubCallError);
      expect(failed.status).toBe(status);
      expect(failed.message).toMatch(
        new RegExp(`^GitHub answered ${status} on PATCH /repos/acme/demo/issues/comments/5: Nope`),
      );
      expect(failed.message).not.toMatch(/ghs_/);
      expect(writes(f)).toHaveLength(1);
    },
  );

  it('paces writes: consecutive writes at least writeGapMs apart', async () => {
    const f = await fake();
    f.installations.add(7);
    f.repoInstallations.set('acme/demo', 7);
    const { client: c } = client(f, { pacing: { writeGapMs: 150, commentGapMs: 10 } });
    // The first write mints the token and opens the connection: the paced ones then travel alike.
    await c.updateComment(REPO, 1, 'warm');
    await Promise.all([2, 3, 4].map((n) => c.updateComment(REPO, n, 'x')));
    const at = writes(f).map((r) => r.at);
    expect(at).toHaveLength(4);
    // The limiter spaces the requests' starts; their arrivals may differ by a little travel time.
    for (let i = 1; i < at.length; i++) expect((at[i] ?? 0) - (at[i - 1] ?? 0)).toBeGreaterThanOrEqual(125);
  });

  it('works with a token: statuses, head sha, identity from GET /user', async () => {
    const f = await fake();
    f.validTokens.add('ghp_statictoken0123456789');
    const { client: c } = client(f, { auth: { kind: 'token', token: 'ghp_statictoken0123456789' } });
    expect(c.mode).toBe('token');
    expect(await c.tokenFor('acme/demo')).toBe('ghp_statictoken0123456789');
    const sha = await c.headSha(REPO, 4);
    await c.createStatus(REPO, sha, { state: 'pending', context: 'the-loop', description: 'working' });
    const status = f.requests.at(-1);
    expect(status?.path).toBe(`/repos/acme/demo/statuses/${sha}`);
    expect(status?.authorization).toBe('token ghp_statictoken0123456789');
    expect(status?.body).toEqual({ state: 'pending', context: 'the-loop', description: 'working' });
    expect(await c.identity()).toEqual({ login: 'octo', appId: undefined });
    expect(f.minted).toEqual([]);
  });

  it('creates and completes a check run', async () => {
    const f = await fake();
    f.installations.add(7);
    f.repoInstallations.set('acme/demo', 7);
    const { client: c } = client(f);
    const input = {
      name: 'the-loop',
      headSha: 'b'.repeat(40),
      status: 'in_progress' as const,
      title: 'Working',
      summary: 's',
    };
    const { id } = await c.createCheckRun(REPO, { ...input, externalId: 'd-1' });
    await c.updateCheckRun(REPO, id, { ...input, status: 'completed', conclusion: 'success' });
    const [create, update] = f.requests.filter((r) => r.path.includes('check-runs'));
    expect(create?.body).toMatchObject({
      head_sha: 'b'.repeat(40),
      external_id: 'd-1',
      status: 'in_progress',
    });
    expect(update?.path).toBe(`/repos/acme/demo/check-runs/${id}`);
    expect(update?.body).toMatchObject({
      status: 'completed',
      conclusion: 'success',
      output: { title: 'Working' },
    });
  });
});
