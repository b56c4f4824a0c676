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
// The first token the fake GitHub mints: the only credential the git upstream accepts.
const MINTED = fakeInstallationToken(INSTALLATION, 1);

let root: string;
let upstream: GitUpstream;
let api: FakeAppAuth;
let harness: Harness | undefined;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-git-app-'));
  upstream = await startGitUpstream({ token: MINTED });
});

afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await api?.close();
  await upstream.close();
  rmSync(root, { recursive: true, force: true });
});

it("pushes with the App installation's token, minted once, never the capability token", async () => {
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
  const bare = upstream.createRepo('acme', 'demo');
  const h = await startHarness({
    gitUrl: upstream.url,
    upstreamToken: undefined,
    // What the daemon's ports do with the client (src/gateway/daemon-ports.ts).
    tokenFor: (session) => client.tokenFor(`${session.owner}/${session.repo}`),
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

  const pushed = await runGit(work, h.gitEnv, 'push', 'origin', 'the-loop/issue-1');
  expect(pushed.stderr).not.toMatch(/refused|denied|error/i);
  expect(pushed.code).toBe(0);
  await h.settled();
  expect(upstream.refs('acme', 'demo')['refs/heads/the-loop/issue-1']).toBe(git(work, 'rev-parse', 'HEAD'));

  const basic = `Basic ${Buffer.from(`x-access-token:${MINTED}`).toString('base64')}`;
  expect(upstream.requests.length).toBeGreaterThanOrEqual(2);
  for (const request of upstream.requests) {
    expect(request.authorized).toBe(true);
    expect(request.headers.authorization).toBe(basic);
    expect(JSON.stringify(request.headers)).not.toContain(TEST_TOKEN);
  }
  // Minted once for the push's requests, with a JWT the fake verified against the App's public key.
  expect(api.minted).toEqual([{ installationId: INSTALLATION, token: MINTED }]);
  expect(api.badJwts).toEqual([]);
  expect(h.errors).toEqual([]);
  expect(h.logs.join('\n')).not.toContain(MINTED);
});
