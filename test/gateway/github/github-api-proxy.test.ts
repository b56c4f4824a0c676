/**
 * The GitHub API proxy with the real `gh` 2.23 in front (over a Unix socket, as `http_unix_socket`
 * sends it) and a mock GitHub API behind that accepts only the real token: merges refused under the
 * default policy and printed by gh, allowed and settled from the answer under a permissive one, the
 * capability token never forwarded, another repository refused, reads passed, and an upstream that
 * hangs or resets answered with a clear error.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../../src/acts/policy.js';
import { createGitHubApiHandler, handleGitHubApi } from '../../../src/gateway/github/api-proxy.js';
import type { GatewayHandler } from '../../../src/gateway/types.js';
import { startMockGitHubApi } from '../../fixtures/mock-github-api.js';
import {
  type GitHubHarness,
  prepareGhDir,
  REAL_TOKEN,
  runGh,
  startHarness,
  TEST_TOKEN,
} from '../github-harness.js';

/** The default policy but with pull request merges set to `rule`. */
const mergePolicy = (rule: 'allow' | 'deny-protected') =>
  resolvePolicy(undefined, { acts: { 'pr-merge': rule } }, 'main');

let dir: string;
let h: GitHubHarness;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tl-gh-'));
  prepareGhDir(dir);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function setUp(handler: GatewayHandler = handleGitHubApi): Promise<void> {
  h = await startHarness(dir, handler, {
    pulls: [{ number: 1 }, { number: 2, base: 'develop' }, { number: 7, repo: 'other/repo' }],
  });
}

afterEach(async () => {
  // Whatever happened, the upstream saw only the real token, and no log line holds either token.
  for (const r of h.mock.requests) {
    expect(JSON.stringify(r.headers)).not.toContain(TEST_TOKEN);
    expect(r.headers.authorization).toBe(`Bearer ${REAL_TOKEN}`);
  }
  expect(h.logs.join('')).not.toContain(TEST_TOKEN);
  expect(h.logs.join('')).not.toContain(REAL_TOKEN);
  await h.close();
});

const mutationsSeen = (x: GitHubHarness) =>
  x.mock.requests.filter((r) => /mutation|\/merge$/.test(`${r.body} ${r.path}`));

describe('gh pr merge through the gateway', () => {
  beforeEach(() => setUp());

  it('is refused under the default policy: gh prints the reason, nothing is merged', async () => {
    const ran = await h.gh('pr', 'merge', '1', '--squash');
    expect(ran.code).not.toBe(0);
    expect(ran.stderr).toContain(
      '[the-loop policy] merging a pull request is not allowed in this repository',
    );
    expect(h.mock.merges).toEqual([]);
    expect(mutationsSeen(h)).toEqual([]);
    // gh's reads before the merge went through, with the real token.
    expect(h.mock.requests.some((r) => r.body.includes('PullRequestByNumber'))).toBe(true);
    expect(h.acts).toEqual([
      expect.objectContaining({
        kind: 'pr-merge',
        outcome: 'blocked',
        verdict: 'deny',
        rule: 'pr-merge: deny',
      }),
    ]);
    expect(h.acts[0]?.detail).toMatchObject({ via: 'GraphQL', mutation: 'mergePullRequest', pr: 'PR_1' });
  });

  it('is forwarded with the real token and recorded succeeded when the policy allows it', async () => {
    h.policy = mergePolicy('allow');
    const ran = await h.gh('pr', 'merge', '1', '--squash');
    expect(ran.code, ran.stderr).toBe(0);
    expect(h.mock.merges).toEqual([
      { number: 1, repo: 'acme/demo', via: 'graphql', method: 'squash', auto: false },
    ]);
    expect(h.acts).toHaveLength(1);
    expect(h.acts[0]).toMatchObject({ kind: 'pr-merge', outcome: 'succeeded', verdict: 'allow' });
    // The repository was verified by a node lookup, which also named the base branch.
    expect(h.acts[0]?.detail).toMatchObject({ repo: 'acme/demo', into: 'main', upstream: '200' });
  });

  it('under deny-protected, is judged by the pull request base the upstream names', async () => {
    h.policy = mergePolicy('deny-protected');
    const toMain = await h.gh('pr', 'merge', '1', '--merge');
    expect(toMain.code).not.toBe(0);
    expect(toMain.stderr).toContain('to the protected branch main is not allowed');
    const toDevelop = await h.gh('pr', 'merge', '2', '--merge');
    expect(toDevelop.code, toDevelop.stderr).toBe(0);
    expect(h.mock.merges.map((m) => m.number)).toEqual([2]);
    expect(h.acts.map((a) => [a.outcome, a.detail.into])).toEqual([
      ['blocked', 'main'],
      ['succeeded', 'develop'],
    ]);
  });

  it('records a merge the upstream refuses as failed', async () => {
    h.policy = mergePolicy('allow');
    const query = 'mutation{mergePullRequest(input:{pullRequestId:"PR_404"}){clientMutationId}}';
    const ran = await h.gh('api', 'graphql', '-f', `query=${query}`);
    expect(ran.code).not.toBe(0);
    // The lookup found no such node: the repository is unverified, so it was never sent.
    expect(h.acts[0]).toMatchObject({ outcome: 'blocked', rule: 'pr-merge: unverified repository' });
    const merged = await h.gh(
      'api',
      'graphql',
      '-f',
      'query=mutation{m: mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}',
    );
    expect(merged.code, merged.stderr).toBe(0);
    const again = await h.gh(
      'api',
      'graphql',
      '-f',
      'query=mutation{m: mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}',
    );
    expect(again.stdout + again.stderr).toContain('Pull Request is not mergeable');
    expect(h.acts.slice(1).map((a) => a.outcome)).toEqual(['succeeded', 'failed']);
    expect(h.acts[2]?.detail.upstream).toBe('200, UNPROCESSABLE');
  });
});

describe('gh api through the gateway', () => {
  beforeEach(() => setUp());
  const MERGE = 'query=mutation{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}';

  it('graphql mergePullRequest: refused by default, merged when allowed', async () => {
    const refused = await h.gh('api', 'graphql', '-f', MERGE);
    expect(refused.code).not.toBe(0);
    expect(refused.stdout + refused.stderr).toContain('[the-loop policy]');
    expect(h.mock.merges).toEqual([]);
    h.policy = mergePolicy('allow');
    const allowed = await h.gh('api', 'graphql', '-f', MERGE);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(JSON.parse(allowed.stdout)).toEqual({ data: { mergePullRequest: { clientMutationId: null } } });
    expect(h.mock.merges).toHaveLength(1);
    expect(h.acts.map((a) => [a.kind, a.outcome])).toEqual([
      ['pr-merge', 'blocked'],
      ['pr-merge', 'succeeded'],
    ]);
  });

  it('enablePullRequestAutoMerge is judged as a merge and settled with auto', async () => {
    const auto = 'query=mutation{enablePullRequestAutoMerge(input:{pullRequestId:"PR_2"}){clientMutationId}}';
    expect((await h.gh('api', 'graphql', '-f', auto)).stderr).toContain('[the-loop policy]');
    h.policy = mergePolicy('deny-protected');
    const ran = await h.gh('api', 'graphql', '-f', auto);
    expect(ran.code, ran.stderr).toBe(0);
    expect(h.mock.merges).toEqual([
      { number: 2, repo: 'acme/demo', via: 'graphql', method: 'merge', auto: true },
    ]);
    expect(h.acts.map((a) => [a.outcome, a.detail.auto, a.detail.into])).toEqual([
      ['blocked', true, undefined],
      ['succeeded', true, 'develop'],
    ]);
  });

  it('REST PUT pulls/1/merge: refused by default, merged when allowed', async () => {
    const refused = await h.gh('api', '-X', 'PUT', 'repos/acme/demo/pulls/1/merge');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('[the-loop policy] merging a pull request is not allowed');
    expect(h.mock.merges).toEqual([]);
    h.policy = mergePolicy('allow');
    const allowed = await h.gh(
      'api',
      '-X',
      'PUT',
      'repos/acme/demo/pulls/1/merge',
      '-f',
      'merge_method=rebase',
    );
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(JSON.parse(allowed.stdout)).toMatchObject({ merged: true });
    expect(h.mock.merges).toEqual([
      { number: 1, repo: 'acme/demo', via: 'rest', method: 'rebase', auto: false },
    ]);
    expect(h.acts.map((a) => [a.command, a.outcome, a.detail.upstream])).toEqual([
      ['PUT /repos/acme/demo/pulls/1/merge', 'blocked', undefined],
      ['PUT /repos/acme/demo/pulls/1/merge', 'succeeded', '200'],
    ]);
  });

  it('REST merge under deny-protected looks up the base branch with the real token', async () => {
    h.policy = mergePolicy('deny-protected');
    const ran = await h.gh('api', '-X', 'PUT', 'repos/acme/demo/pulls/1/merge');
    expect(ran.stderr).toContain('to the protected branch main');
    expect(h.mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /repos/acme/demo/pulls/1']);
    expect(h.acts[0]).toMatchObject({ outcome: 'blocked', detail: { into: 'main' } });
  });

  it('refuses another repository whatever the method, and a merge of its pull request by node id', async () => {
    const read = await h.gh('api', 'repos/other/repo');
    expect(read.code).not.toBe(0);
    expect(read.stderr).toContain('this session serves acme/demo only');
    expect(read.stderr).toContain('HTTP 403');
    h.policy = mergePolicy('allow');
    const other =
      'query=mutation{mergePullRequest(input:{pullRequestId:"PR_other_repo_7"}){clientMutationId}}';
    const merge = await h.gh('api', 'graphql', '-f', other);
    expect(merge.code).not.toBe(0);
    expect(h.mock.merges).toEqual([]);
    expect(h.mock.requests.some((r) => r.path.includes('other'))).toBe(false);
    expect(h.acts).toEqual([
      expect.objectContaining({ outcome: 'blocked', rule: 'pr-merge: other repository' }),
    ]);
  });

  it('passes reads through: REST of the session repository, /user, GraphQL queries', async () => {
    const repo = await h.gh('api', 'repos/acme/demo');
    expect(JSON.parse(repo.stdout)).toMatchObject({ full_name: 'acme/demo', default_branch: 'main' });
    const user = await h.gh('api', 'user');
    expect(JSON.parse(user.stdout)).toMatchObject({ login: 'mock-user' });
    const viewer = await h.gh('api', 'graphql', '-f', 'query={viewer{login}}');
    expect(JSON.parse(viewer.stdout)).toEqual({ data: { viewer: { login: 'mock-user' } } });
    // An allowed mutation that is not an act goes through unjudged once its node is placed in the
    // session's repository.
    const comment = await h.gh(
      'api',
      'graphql',
      '-f',
      'query=mutation{addComment(input:{subjectId:"PR_1",body:"x"}){clientMutationId}}',
    );
    expect(comment.code, comment.stderr).toBe(0);
    expect(h.mock.requests.filter((r) => r.body.includes('addComment'))).toHaveLength(1);
    expect(h.mock.comments).toEqual([{ subjectId: 'PR_1', body: 'x' }]);
    expect(h.acts).toEqual([]);
  });
});

describe('over TCP, and when things go wrong', () => {
  const put = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${h.url}/gh${path}`, {
      method: path === '/graphql' ? 'POST' : 'PUT',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json', ...headers },
      body,
    });

  it('serves a client under /gh/ with the same policy, and refuses bad bodies before forwarding', async () => {
    await setUp(createGitHubApiHandler({ maxBodyBytes: 4096 }));
    const merge = await put('/repos/acme/demo/pulls/1/merge', '{}');
    expect(merge.status).toBe(403);
    expect(merge.headers.get('content-type')).toContain('application/json');
    expect(await merge.json()).toMatchObject({ message: expect.stringContaining('[the-loop policy]') });
    expect((await put('/graphql', 'mutation { mergePullRequest }')).status).toBe(400);
    expect((await put('/repos/acme/demo/contents/x', 'not json')).status).toBe(400);
    const big = await put('/repos/acme/demo/contents/x', JSON.stringify({ content: 'x'.repeat(8192) }));
    expect(big.status).toBe(413);
    const batch = JSON.stringify([
      { query: '{viewer{login}}' },
      { query: 'mutation{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}' },
    ]);
    expect((await put('/graphql', batch)).status).toBe(403);
    const gzipped = await put('/graphql', '{"query":"{viewer{login}}"}', { 'content-encoding': 'gzip' });
    expect(gzipped.status).toBe(415);
    expect(h.mock.requests).toEqual([]);
    expect(h.acts.map((a) => [a.kind, a.outcome])).toEqual([
      ['pr-merge', 'blocked'],
      ['pr-merge', 'blocked'],
    ]);
  });

  it('places a contents write on the default branch by a lookup, and settles REST h.acts from the status', async () => {
    await setUp();
    const onDefault = await put(
      '/repos/acme/demo/contents/README.md',
      JSON.stringify({ message: 'm', content: '' }),
    );
    expect(onDefault.status).toBe(403);
    expect(((await onDefault.json()) as { message: string }).message).toContain(
      'pushing to the protected branch main',
    );
    const onDocs = await put(
      '/repos/acme/demo/contents/README.md',
      JSON.stringify({ content: '', branch: 'docs' }),
    );
    // The mock has no contents API: the act went through, and failed there.
    expect(onDocs.status).toBe(404);
    const foreign = await put('/repos/other/repo/pulls/7/merge', '{}');
    expect(foreign.status).toBe(403);
    expect(h.mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /repos/acme/demo',
      'PUT /repos/acme/demo/contents/README.md',
    ]);
    expect(h.acts.map((a) => [a.kind, a.outcome, a.rule, a.detail.upstream])).toEqual([
      ['git-push', 'blocked', 'git-push: deny-protected', undefined],
      ['git-push', 'failed', 'git-push: deny-protected', '404'],
      ['pr-merge', 'blocked', 'pr-merge: other repository', undefined],
    ]);
    expect(h.acts[0]?.detail.branches).toEqual(['main']);
  });

  it('answers 504 when the upstream hangs and 502 when it resets; the act is unknown', async () => {
    await setUp(createGitHubApiHandler({ idleTimeoutMs: 300 }));
    h.policy = mergePolicy('allow');
    h.mock.trap = (r) => (r.method === 'PUT' ? 'hang' : undefined);
    const hung = await h.gh('api', '-X', 'PUT', 'repos/acme/demo/pulls/1/merge');
    expect(hung.code).not.toBe(0);
    expect(hung.stderr).toContain('the GitHub API did not answer in time');
    expect(hung.stderr).toContain('HTTP 504');
    h.mock.trap = (r) => (r.method === 'PUT' ? 'reset' : undefined);
    const reset = await h.gh('api', '-X', 'PUT', 'repos/acme/demo/pulls/1/merge');
    expect(reset.stderr).toContain('HTTP 502');
    expect(h.acts.map((a) => [a.outcome, a.detail.upstream])).toEqual([
      ['unknown', 'no answer in time'],
      ['unknown', 'connection failed'],
    ]);
    expect(h.mock.merges).toEqual([]);
  });

  it('refuses a merge when its lookup cannot reach the upstream (deny-protected, branch unknown)', async () => {
    await setUp();
    h.policy = mergePolicy('deny-protected');
    h.mock.trap = () => 'reset';
    const res = await put('/repos/acme/demo/pulls/2/merge', '{}');
    expect(res.status).toBe(403);
    expect(((await res.json()) as { message: string }).message).toContain('without a named branch');
    expect(h.acts[0]).toMatchObject({ outcome: 'blocked', detail: { protectedUnknown: true } });
  });
});

describe('the mock GitHub API', () => {
  beforeEach(() => setUp());

  it('serves the real gh on its own Unix socket, with its token only', async () => {
    const socketPath = join(dir, 'mock.sock');
    const mock = await startMockGitHubApi({ token: REAL_TOKEN, socketPath, pulls: [{ number: 3 }] });
    try {
      const configDir = join(dir, 'gh-direct');
      mkdirSync(configDir, { recursive: true });
      writeFileSync(join(configDir, 'config.yml'), `http_unix_socket: ${socketPath}\n`);
      const merged = await runGh(dir, ['pr', 'merge', '3', '--rebase'], { configDir, token: REAL_TOKEN });
      expect(merged.code, merged.stderr).toBe(0);
      expect(mock.merges).toEqual([
        { number: 3, repo: 'acme/demo', via: 'graphql', method: 'rebase', auto: false },
      ]);
      const refused = await runGh(dir, ['api', 'user'], { configDir, token: TEST_TOKEN });
      expect(refused.stderr).toContain('HTTP 401');
      expect(mock.requests.at(-1)).toMatchObject({ path: '/user', authorized: false });
    } finally {
      await mock.close();
    }
  });
});
