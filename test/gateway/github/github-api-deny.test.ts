/**
 * Default deny through the GitHub API proxy, with the real `gh` 2.23 in front and the mock GitHub
 * API behind: the writes and reads the security review reproduced (a deploy key, a collaborator,
 * the repository made public, a webhook, a user key, another repository's code and files, a
 * repository setting by GraphQL) are refused with a message gh prints, never reach the upstream,
 * and the writes are recorded; `gh issue create` and `gh pr comment` still work, their nodes placed
 * in the session's repository first; and `close()` drops the pooled connections.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createGitHubApiHandler, type GitHubApiHandler } from '../../../src/gateway/github/api-proxy.js';
import { type GitHubHarness, prepareGhDir, REAL_TOKEN, startHarness, TEST_TOKEN } from '../github-harness.js';

let dir: string;
let h: GitHubHarness;
let handler: GitHubApiHandler;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tl-gh-deny-'));
  prepareGhDir(dir);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function setUp(): Promise<void> {
  handler = createGitHubApiHandler();
  h = await startHarness(dir, handler, {
    pulls: [{ number: 1 }, { number: 7, repo: 'other/repo' }],
    issues: [{ number: 3 }, { number: 9, repo: 'other/repo' }],
  });
}

afterEach(async () => {
  for (const r of h.mock.requests) expect(r.headers.authorization).toBe(`Bearer ${REAL_TOKEN}`);
  expect(h.logs.join('')).not.toContain(TEST_TOKEN);
  handler.close();
  await h.close();
});

const GATEWAY = '[the-loop gateway]';

describe('writes and reads the gateway does not serve', () => {
  const writes: [string, string[], string][] = [
    [
      'a deploy key with write access',
      ['-X', 'POST', 'repos/acme/demo/keys', '-f', 'key=ssh-ed25519 AAAA', '-F', 'read_only=false'],
      'POST /repos/acme/demo/keys',
    ],
    [
      'a collaborator',
      ['-X', 'PUT', 'repos/acme/demo/collaborators/evil'],
      'PUT /repos/acme/demo/collaborators/evil',
    ],
    [
      'the repository made public',
      ['-X', 'PATCH', 'repos/acme/demo', '-F', 'private=false'],
      'PATCH /repos/acme/demo',
    ],
    [
      'a webhook',
      ['-X', 'POST', 'repos/acme/demo/hooks', '-f', 'config[url]=https://evil.example'],
      'POST /repos/acme/demo/hooks',
    ],
    ['a key on the user', ['-X', 'POST', 'user/keys', '-f', 'key=ssh-ed25519 AAAA'], 'POST /user/keys'],
  ];

  it.each(writes)('%s: refused, printed by gh, recorded, never forwarded', async (_label, args, command) => {
    await setUp();
    const ran = await h.gh('api', ...args);
    expect(ran.code).not.toBe(0);
    expect(ran.stderr).toContain(`${GATEWAY} ${command} is not allowed through the gateway`);
    expect(ran.stderr).toContain('HTTP 403');
    expect(h.mock.requests).toEqual([]);
    expect(h.acts).toEqual([
      expect.objectContaining({
        kind: 'unknown-gh-act',
        command,
        outcome: 'blocked',
        verdict: 'deny',
        rule: 'gateway: not allowed',
      }),
    ]);
  });

  it('refuses reads of other repositories, by search and by GraphQL, and a repository setting by GraphQL', async () => {
    await setUp();
    const search = await h.gh('api', 'search/code?q=repo:other/secret+password');
    expect(search.stderr).toContain('a search must be bound to acme/demo');
    const file = await h.gh(
      'api',
      'graphql',
      '-f',
      'query={repository(owner:"other",name:"secret"){object(expression:"HEAD:.env"){... on Blob{text}}}}',
    );
    expect(file.stderr).toContain(`${GATEWAY} this session serves acme/demo only, not other/secret`);
    const keys = await h.gh('api', 'user/keys');
    expect(keys.stderr).toContain(`${GATEWAY} GET /user/keys is not allowed through the gateway`);
    const update = await h.gh(
      'api',
      'graphql',
      '-f',
      'query=mutation{updateRepository(input:{repositoryId:"R_acme_demo",visibility:PUBLIC}){clientMutationId}}',
    );
    expect(update.stderr).toContain(
      `${GATEWAY} mutation updateRepository is not allowed through the gateway`,
    );
    expect(h.mock.requests).toEqual([]);
    // Reads are refused, not recorded; the mutation is a refused act.
    expect(h.acts.map((a) => [a.kind, a.command, a.rule])).toEqual([
      ['unknown-gh-act', 'POST /graphql updateRepository', 'gateway: not allowed'],
    ]);
  });

  it('refuses a GraphQL request with a query string, since only its body is judged', async () => {
    await setUp();
    const res = await fetch(`${h.url}/gh/graphql?query=${encodeURIComponent('{viewer{login}}')}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{viewer{login}}' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain('no query string');
    expect(h.mock.requests).toEqual([]);
  });
});

describe('issue and pull request work', () => {
  it('gh issue create and gh pr comment work, each node placed in the session repository first', async () => {
    await setUp();
    const created = await h.gh('issue', 'create', '--title', 'Flaky test', '--body', 'It fails on Tuesdays');
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain('https://github.com/acme/demo/issues/');
    expect(h.mock.issues.at(-1)).toMatchObject({ repo: 'acme/demo', title: 'Flaky test' });
    const commented = await h.gh('pr', 'comment', '1', '--body', 'Fixed in the last push');
    expect(commented.code, commented.stderr).toBe(0);
    expect(h.mock.comments).toEqual([{ subjectId: 'PR_1', body: 'Fixed in the last push' }]);
    // The gateway's own lookups, with the real token, before each mutation went.
    const lookups = h.mock.requests.filter((r) => r.body.includes('TheLoopGatewayLookup'));
    expect(lookups.map((r) => JSON.parse(r.body).variables.id)).toEqual(['R_acme_demo', 'PR_1']);
    expect(h.acts).toEqual([]);
  });

  it('refuses and records a comment on another repository, or on a node it cannot place', async () => {
    await setUp();
    const comment = (id: string) =>
      h.gh(
        'api',
        'graphql',
        '-f',
        `query=mutation{addComment(input:{subjectId:"${id}",body:"hi"}){clientMutationId}}`,
      );
    const other = await comment('I_other_repo_9');
    expect(other.stderr).toContain(`${GATEWAY} this session may write to acme/demo only, not to other/repo`);
    const unknown = await comment('I_nowhere');
    expect(unknown.stderr).toContain('could not be verified as acme/demo');
    expect(h.mock.comments).toEqual([]);
    expect(h.mock.requests.filter((r) => r.body.includes('addComment'))).toEqual([]);
    expect(h.acts.map((a) => [a.kind, a.outcome, a.rule, a.detail.mutation])).toEqual([
      ['unknown-gh-act', 'blocked', 'gateway: other repository', 'addComment'],
      ['unknown-gh-act', 'blocked', 'gateway: unverified repository', 'addComment'],
    ]);
  });

  it('REST writes on the allow-list are forwarded (the mock answers 404 to what it does not serve)', async () => {
    await setUp();
    const ran = await h.gh('api', '-X', 'POST', 'repos/acme/demo/issues/3/comments', '-f', 'body=hi');
    expect(ran.stderr).not.toContain(GATEWAY);
    expect(h.mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /repos/acme/demo/issues/3/comments',
    ]);
    expect(h.acts).toEqual([]);
  });
});

describe('close()', () => {
  it("drops the handler's pooled connections to the upstream", async () => {
    await setUp();
    const read = await h.gh('api', 'repos/acme/demo');
    expect(read.code, read.stderr).toBe(0);
    expect(h.mock.openSockets()).toBeGreaterThan(0);
    handler.close();
    await vi.waitFor(() => expect(h.mock.openSockets()).toBe(0));
  });
});
