/**
 * As a GitHub App, the gateway's git credential is the installation token of the session's
 * repository: a real `git push` through the gateway reaches a real `git http-backend` upstream with
 * Basic `x-access-token:<installation token>` the App minted (its JWT verified by a fake GitHub
 * API), never the capability token; the token is minted once and reused across the push's requests.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { resolvePolicy } from '../../../src/acts/policy.js';
import { createGitHubClient } from '../../../src/github-api/client.js';
import { createLogger, memorySink } from '../../../src/log/logger.js';
import { type GitUpstream, startGitUpstream } from '../../fixtures/git-upstream.js';
import {
  type FakeAppAuth,
  fakeInstallationToken,
  startFakeAppAuth,
  testAppKey,
} from '../../helpers/fake-app-auth.js';
import { git } from '../../helpers/git.js';
import { type Harness, runGit, startHarness, TEST_TOKEN } from '../git-harness.js';

const APP_ID = 31337;
const INSTALLATION = 7;

let root: string;
let upstream: GitUpstream | undefined;
let api: FakeAppAuth;
let harness: Harness | undefined;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-git-app-'));
});

afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await api?.close();
  await upstream?.close();
  rmSync(root, { recursive: true, force: true });
});

/**
 * A git upstream that takes only `accepted`, the App's client against the fake API, a gateway that
 * asks it per session, and a work repository one commit ahead on a branch.
 */
async function setup(accepted: string) {
  const up = await startGitUpstream({ token: accepted });
  upstream = up;
  const key = testAppKey();
  api = await startFakeAppAuth({ appId: APP_ID, publicKey: key.publicKey });
  api.installations.add(INSTALLATION);
  api.repoInstallations.set('acme/demo', INSTALLATION);
  const client = createGitHubClient({
    baseUrl: api.url,
    auth: { kind: 'app', appId: APP_ID, privateKey: key.privateKey },
    pacing: { writeGapMs: 10, commentGapMs: 10 },
    logger: createLogger({ level: 'error', sinks: [memorySink()] }),
    userAgent: 'the-loop-test',
  });
  const bare = up.createRepo('acme', 'demo');
  const h = await startHarness({
    gitUrl: up.url,
    upstreamToken: undefined,
    // What the daemon's ports do with the client (src/gateway/daemon-ports.ts).
    tokenFor: (session) => client.tokenFor(`${session.owner}/${session.repo}`),
    tokenRefused: (session) => client.tokenRefused(`${session.owner}/${session.repo}`),
    policy: resolvePolicy(undefined, undefined, 'main'),
    home: root,
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
  git(work, 'checkout', '-q', '-b', 'the-loop/issue-1');
  writeFileSync(join(work, 'README.md'), 'one\ntwo\n');
  git(work, 'commit', '-q', '-am', 'two');
  git(work, 'remote', 'add', 'origin', h.remote('acme', 'demo'));
  return { up, client, h, work, push: () => runGit(work, h.gitEnv, 'push', 'origin', 'the-loop/issue-1') };
}

const basic = (token: string) => `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;

it("pushes with the App installation's token, minted once, never the capability token", async () => {
  const minted = fakeInstallationToken(INSTALLATION, 1);
  const { up, h, work, push } = await setup(minted);

  const pushed = await push();
  expect(pushed.stderr).not.toMatch(/refused|denied|error/i);
  expect(pushed.code).toBe(0);
  await h.settled();
  expect(up.refs('acme', 'demo')['refs/heads/the-loop/issue-1']).toBe(git(work, 'rev-parse', 'HEAD'));

  expect(up.requests.length).toBeGreaterThanOrEqual(2);
  for (const request of up.requests) {
    expect(request.authorized).toBe(true);
    expect(request.headers.authorization).toBe(basic(minted));
    expect(JSON.stringify(request.headers)).not.toContain(TEST_TOKEN);
  }
  // Minted once for the push's requests, with a JWT the fake verified against the App's public key.
  expect(api.minted).toEqual([{ installationId: INSTALLATION, token: minted }]);
  expect(api.badJwts).toEqual([]);
  expect(h.errors).toEqual([]);
  expect(h.logs.join('\n')).not.toContain(minted);
});

it('drops an installation token the upstream refuses: the next push carries a fresh one', async () => {
  // The upstream takes only the second token minted: the first is "revoked" before its expiry.
  const { up, client, h, push } = await setup(fakeInstallationToken(INSTALLATION, 2));
  expect(await client.tokenFor('acme/demo')).toBe(fakeInstallationToken(INSTALLATION, 1));

  const refused = await push();
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toContain("refused the gateway's GitHub credential");
  const pushed = await push();
  expect(pushed.code).toBe(0);
  await h.settled();
  expect(api.minted.map((m) => m.token)).toEqual([1, 2].map((n) => fakeInstallationToken(INSTALLATION, n)));
  expect(up.requests.at(-1)?.headers.authorization).toBe(basic(fakeInstallationToken(INSTALLATION, 2)));
});
