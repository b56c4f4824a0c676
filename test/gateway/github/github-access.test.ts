/**
 * What the GitHub API proxy forwards at all (default deny), decided from the request alone: REST
 * writes on the allow-list or judged as acts, everything else refused and recorded; REST reads of
 * the session's repository and a few others; GraphQL mutations on the allow-list (with the nodes
 * they write to), queries bounded to the session's repository.
 */
import { describe, expect, it } from 'vitest';
import { GRAPHQL_ALLOWED_MUTATIONS } from '../../../src/gateway/github/graphql-access.js';
import { type Plan, plan } from '../../../src/gateway/github/plan.js';
import { searchRefusal } from '../../../src/gateway/github/rest-access.js';
import type { GatewaySession } from '../../../src/gateway/types.js';

const SESSION: GatewaySession = {
  id: 's1',
  workItem: 'github:acme/demo#1',
  owner: 'acme',
  repo: 'demo',
  engine: 'claude',
  cwd: '/',
};
const API = 'https://api.github.com';

function planOf(method: string, path: string, body?: unknown): Plan {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  return plan({ method, path, body: Buffer.from(text), encoded: false, apiUrl: API }, SESSION);
}

/** 'forward' (no act), 'act' (judged by the policy), or the refusal's status. */
function outcome(p: Plan): 'forward' | 'act' | number {
  if ('refused' in p) return p.refused.status;
  return p.acts.length > 0 ? 'act' : 'forward';
}

const gql = (query: string, variables?: unknown) => planOf('POST', '/graphql', { query, variables });

describe('REST writes', () => {
  const refused: [string, string, unknown?][] = [
    ['POST', '/repos/acme/demo/keys', { title: 'k', key: 'ssh-ed25519 AAAA', read_only: false }],
    ['PUT', '/repos/acme/demo/collaborators/evil', { permission: 'admin' }],
    ['PATCH', '/repos/acme/demo', { private: false }],
    ['POST', '/repos/acme/demo/hooks', { config: { url: 'https://evil.example' } }],
    ['PATCH', '/repos/acme/demo/invitations/1', { permissions: 'admin' }],
    ['PUT', '/repos/acme/demo/actions/secrets/TOKEN', { encrypted_value: 'x' }],
    ['POST', '/repos/acme/demo/actions/variables', { name: 'X', value: 'y' }],
    ['PUT', '/repos/acme/demo/environments/prod', {}],
    ['POST', '/repos/acme/demo/pages', {}],
    ['PUT', '/repos/acme/demo/actions/permissions', { enabled: true }],
    ['POST', '/repos/acme/demo/actions/runs/1/rerun'],
    ['POST', '/repos/acme/demo/statuses/abc', { state: 'success', context: 'ci' }],
    ['POST', '/repos/acme/demo/check-runs', { name: 'ci', conclusion: 'success' }],
    ['POST', '/repos/acme/demo/forks'],
    ['POST', '/repos/acme/demo/git/tags', { tag: 'v1' }],
    ['DELETE', '/repos/acme/demo/issues/comments/1'],
    ['PUT', '/repos/acme/demo/issues/1/lock'],
    ['PUT', '/repos/acme/demo/pulls/1/reviews/2/dismissals', { message: 'x' }],
    ['PATCH', '/repos/acme/demo/releases/5', { body: 'notes' }],
    // Matched as written: a lenient spelling is not on the allow-list.
    ['POST', '/repos/acme/demo/Issues', { title: 't' }],
    ['POST', '/repos/acme/demo/issues.json', { title: 't' }],
    ['OPTIONS', '/repos/acme/demo/issues'],
    // Found as an act, refused all the same.
    ['POST', '/repos/acme/demo/transfer', { new_owner: 'evil' }],
    ['POST', '/user/keys', { key: 'ssh-ed25519 AAAA' }],
    ['POST', '/user/repos', { name: 'x' }],
    ['PUT', '/user/following/evil'],
    ['POST', '/orgs/acme/repos', { name: 'x' }],
    ['PUT', '/orgs/acme/memberships/evil', { role: 'admin' }],
    ['POST', '/gists', { files: {} }],
    ['POST', '/markdown', { text: 'x' }],
    ['POST', '/repos', {}],
  ];
  it.each(refused)('%s %s is refused and recorded', (method, path, body) => {
    const p = planOf(method, path, body);
    expect(p).toEqual({
      refused: {
        status: 403,
        message: `${method} ${path} is not allowed through the gateway`,
        acts: [
          expect.objectContaining({
            kind: 'unknown-gh-act',
            command: `${method} ${path}`,
            outcome: 'blocked',
            verdict: 'deny',
            rule: 'gateway: not allowed',
          }),
        ],
      },
    });
  });

  const allowed: [string, string, unknown?][] = [
    ['POST', '/repos/acme/demo/issues', { title: 't' }],
    ['PATCH', '/repos/acme/demo/issues/3', { state: 'closed' }],
    ['POST', '/repos/acme/demo/issues/3/comments', { body: 'x' }],
    ['PATCH', '/repos/acme/demo/issues/comments/9', { body: 'x' }],
    ['POST', '/repos/acme/demo/issues/3/labels', { labels: ['bug'] }],
    ['DELETE', '/repos/acme/demo/issues/3/labels/good%20first%20issue'],
    ['POST', '/repos/acme/demo/issues/3/assignees', { assignees: ['me'] }],
    ['POST', '/repos/acme/demo/issues/3/reactions', { content: '+1' }],
    ['POST', '/repos/acme/demo/issues/comments/9/reactions', { content: 'heart' }],
    ['POST', '/repos/acme/demo/pulls', { title: 't', head: 'f', base: 'main' }],
    ['PATCH', '/repos/acme/demo/pulls/1', { body: 'x' }],
    ['POST', '/repos/acme/demo/pulls/1/reviews', { event: 'COMMENT' }],
    ['POST', '/repos/acme/demo/pulls/1/reviews/2/events', { event: 'APPROVE' }],
    ['POST', '/repos/acme/demo/pulls/1/comments', { body: 'x' }],
    ['POST', '/repos/acme/demo/pulls/1/comments/4/replies', { body: 'x' }],
    ['PATCH', '/repos/acme/demo/pulls/comments/4', { body: 'x' }],
    ['POST', '/repos/acme/demo/pulls/1/requested_reviewers', { reviewers: ['a'] }],
    ['PUT', '/repos/acme/demo/pulls/1/update-branch', {}],
    ['POST', '/repos/acme/demo/git/blobs', { content: 'x' }],
    ['POST', '/repos/acme/demo/git/trees', { tree: [] }],
    ['POST', '/repos/acme/demo/git/commits', { message: 'm', tree: 't' }],
    ['POST', '/repos/acme/demo/releases/generate-notes', { tag_name: 'v1' }],
    // Case-insensitive owner and name, as GitHub reads them.
    ['POST', '/repos/ACME/Demo/issues/3/comments', { body: 'x' }],
  ];
  it.each(allowed)('%s %s is forwarded', (method, path, body) => {
    expect(outcome(planOf(method, path, body))).toBe('forward');
  });

  const acts: [string, string, unknown?][] = [
    ['PUT', '/repos/acme/demo/pulls/1/merge', {}],
    ['POST', '/repos/acme/demo/merges', { base: 'main', head: 'f' }],
    ['POST', '/repos/acme/demo/git/refs', { ref: 'refs/heads/x', sha: 'a' }],
    ['DELETE', '/repos/acme/demo/git/refs/heads/x'],
    ['PUT', '/repos/acme/demo/contents/README.md', { content: '', branch: 'x' }],
    ['POST', '/repos/acme/demo/releases', { tag_name: 'v1' }],
    ['POST', '/repos/acme/demo/actions/workflows/ci.yml/dispatches', { ref: 'main' }],
    ['PUT', '/repos/acme/demo/branches/main/protection', {}],
    ['DELETE', '/repos/acme/demo'],
  ];
  it.each(acts)('%s %s is an act, judged by the policy', (method, path, body) => {
    expect(outcome(planOf(method, path, body))).toBe('act');
  });

  it('refuses and records a write to another repository; its acts go to the policy', () => {
    const p = planOf('PUT', '/repos/other/repo/collaborators/evil', {});
    expect(p).toMatchObject({
      refused: {
        status: 403,
        message: 'this session serves acme/demo only, not other/repo',
        acts: [{ kind: 'unknown-gh-act', rule: 'gateway: other repository', detail: { repo: 'other/repo' } }],
      },
    });
    expect(outcome(planOf('PUT', '/repos/other/repo/pulls/1/merge', {}))).toBe('act');
  });
});

describe('REST reads', () => {
  const passed = [
    '/repos/acme/demo',
    '/repos/acme/demo/pulls/1/files?per_page=100',
    '/repos/acme/demo/contents/src/a.ts?ref=main',
    '/',
    '/user',
    '/rate_limit',
    '/meta',
    '/search/issues?q=repo:acme/demo+is:open+author:me',
    '/search/code?q=secret+repo:acme/demo',
    '/search/commits?q=repo%3A%22acme%2Fdemo%22+fix',
    '/search/issues?q=repo:acme/demo+-repo:other/secret',
  ];
  it.each(passed)('GET %s passes', (path) => {
    expect(outcome(planOf('GET', path))).toBe('forward');
    expect(outcome(planOf('HEAD', path))).toBe('forward');
  });

  const refused: [string, string][] = [
    ['/user/keys', 'GET /user/keys is not allowed through the gateway'],
    ['/user/repos', 'GET /user/repos is not allowed through the gateway'],
    ['/users/someone/repos', 'GET /users/someone/repos is not allowed through the gateway'],
    ['/orgs/acme/repos', 'GET /orgs/acme/repos is not allowed through the gateway'],
    ['/gists', 'GET /gists is not allowed through the gateway'],
    ['/notifications', 'GET /notifications is not allowed through the gateway'],
    ['/octocat', 'GET /octocat is not allowed through the gateway'],
    ['/repos', 'GET /repos is not allowed through the gateway'],
    ['/search/users?q=repo:acme/demo', 'GET /search/users is not allowed through the gateway'],
    ['/search/code?q=repo:other/secret', 'repo:acme/demo, not repo:other/secret'],
    ['/search/code?q=password', 'a search must be bound to acme/demo'],
    ['/search/code', 'a search needs q'],
    ['/search/issues?q=repo:acme/demo&q=repo:other/secret', 'not repo:other/secret'],
    ['/repos/other/secret/contents/.env', 'this session serves acme/demo only, not other/secret'],
  ];
  it.each(refused)('GET %s is refused', (path, message) => {
    const p = planOf('GET', path);
    expect(p).toMatchObject({ refused: { status: 403, message: expect.stringContaining(message) } });
    // Reads are not acts: nothing is recorded.
    expect('refused' in p && p.refused.acts).toBeFalsy();
  });

  it('binds a search to the session repository, with nothing that could widen it again', () => {
    const rows: [string, boolean][] = [
      ['repo:acme/demo is:pr', true],
      ['REPO:ACME/DEMO bug', true],
      ['repo:"acme/demo" "repo:other/x"', true],
      ['repo:acme/demo org:acme', true],
      ['repo:acme/demo repo:other/secret', false],
      ['repo:acme/demo OR repo:other/secret', false],
      ['repo:acme/demo or author:me', false],
      ['repo:acme/demo NOT is:open', false],
      ['repo:acme/demo (is:open)', false],
      ['repo:acme/demo org:other', false],
      ['repo:acme/demo user:other', false],
      ['-repo:acme/demo', false],
      ['repo:acme/demo "unclosed', false],
      ['repo:acme/demo,other/secret', false],
      ['', false],
    ];
    for (const [q, ok] of rows) expect(searchRefusal(q, SESSION) === undefined, q).toBe(ok);
  });
});

describe('GraphQL mutations', () => {
  it.each([
    [
      'updateRepository',
      'mutation{updateRepository(input:{repositoryId:"R_1",visibility:PUBLIC}){clientMutationId}}',
    ],
    ['deleteIssue', 'mutation{deleteIssue(input:{issueId:"I_1"}){clientMutationId}}'],
    ['transferIssue', 'mutation{transferIssue(input:{issueId:"I_1",repositoryId:"R_9"}){clientMutationId}}'],
    ['createLinkedBranch', 'mutation{createLinkedBranch(input:{issueId:"I_1",oid:"a"}){clientMutationId}}'],
    [
      'dismissPullRequestReview',
      'mutation{dismissPullRequestReview(input:{pullRequestReviewId:"R"}){clientMutationId}}',
    ],
    [
      'addProjectV2ItemById',
      'mutation{addProjectV2ItemById(input:{projectId:"P",contentId:"I_1"}){clientMutationId}}',
    ],
    [
      'createRepository',
      'mutation{x: createRepository(input:{name:"x",visibility:PUBLIC}){clientMutationId}}',
    ],
  ])('%s is refused and recorded', (mutation, query) => {
    expect(gql(query)).toMatchObject({
      refused: {
        status: 403,
        message: `mutation ${mutation} is not allowed through the gateway`,
        acts: [
          {
            kind: 'unknown-gh-act',
            command: `POST /graphql ${mutation}`,
            outcome: 'blocked',
            verdict: 'deny',
            rule: 'gateway: not allowed',
            detail: { via: 'GraphQL', mutation },
          },
        ],
      },
    });
  });

  it('finds a mutation that is not allowed anywhere: fragments, batches, beside allowed ones', () => {
    const hidden = gql(
      'mutation { ...A } fragment A on Mutation { addComment(input:{subjectId:"PR_1",body:"x"}){clientMutationId} u: updateRepository(input:{repositoryId:"R"}){clientMutationId} }',
    );
    expect(hidden).toMatchObject({
      refused: { status: 403, acts: [{ detail: { mutation: 'updateRepository' } }] },
    });
    const batch = planOf('POST', '/graphql', [
      { query: '{viewer{login}}' },
      { query: 'mutation{updateRepository(input:{repositoryId:"R"}){clientMutationId}}' },
    ]);
    expect(batch).toMatchObject({ refused: { status: 403 } });
  });

  it('lets every allowed mutation through with the node it writes to, and acts to the policy', () => {
    expect(GRAPHQL_ALLOWED_MUTATIONS).toEqual(
      expect.arrayContaining(['createPullRequest', 'addComment', 'createIssue', 'submitPullRequestReview']),
    );
    const created = gql(
      'mutation IssueCreate($input: CreateIssueInput!) { createIssue(input: $input) { issue { id url } } }',
      { input: { repositoryId: 'R_acme_demo', title: 't' } },
    );
    expect(created).toMatchObject({ acts: [], targets: [{ mutation: 'createIssue', id: 'R_acme_demo' }] });
    const review = gql(
      'mutation{submitPullRequestReview(input:{pullRequestId:"PR_1",pullRequestReviewId:"PRR_2",event:APPROVE}){clientMutationId}}',
    );
    expect(review).toMatchObject({ targets: [{ id: 'PR_1' }, { id: 'PRR_2' }] });
    const merge = gql('mutation{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}');
    expect(merge).toMatchObject({ acts: [{ kind: 'pr-merge' }], targets: [] });
  });

  it('refuses an allowed mutation that names no node to write to', () => {
    expect(outcome(gql('mutation{addComment(input:{body:"x"}){clientMutationId}}'))).toBe(403);
    expect(outcome(gql('mutation{addComment(input:{subjectId:7,body:"x"}){clientMutationId}}'))).toBe(403);
    expect(outcome(gql('mutation($i: AddCommentInput!){addComment(input:$i){clientMutationId}}'))).toBe(403);
  });
});

describe('GraphQL queries', () => {
  const OWN = 'repository(owner:"acme",name:"demo")';
  const passed: [string, string, unknown?][] = [
    ['the session repository', `{ ${OWN} { pullRequest(number:1){ id title } } }`],
    [
      'gh RepositoryInfo, by variables',
      'query RepositoryInfo($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id parent { id } } }',
      { owner: 'ACME', name: 'demo' },
    ],
    ['viewer and rateLimit', '{ viewer { login } rateLimit { remaining } }'],
    ['node and nodes (ids are opaque)', '{ node(id:"X"){ id } nodes(ids:["A","B"]){ id } }'],
    ['introspection', '{ __type(name:"PullRequest"){ fields { name } } __schema { queryType { name } } }'],
    ['a bound search', '{ search(query:"repo:acme/demo is:open", type:ISSUE, first:5){ issueCount } }'],
    [
      'reviewer ids',
      '{ u000: user(login:"someone"){ id login } organization(login:"ACME"){ team(slug:"core"){ id } } }',
    ],
    [
      'pull requests of the repository',
      `{ ${OWN} { pullRequests(first:5){ nodes { number headRepository { name } } } } }`,
    ],
    [
      'issues of a repository fragment',
      `query { ${OWN} { ...R } } fragment R on Repository { issues(first:1){ totalCount } }`,
    ],
    [
      "a pull request's projects, by name",
      `{ ${OWN} { pullRequest(number:1){ projectCards(first:9){ nodes { project { name } column { name } } } projectItems(first:9){ nodes { project { id title } } } } } }`,
    ],
    [
      "a review request's team",
      `{ ${OWN} { pullRequest(number:1){ reviewRequests(first:9){ nodes { requestedReviewer { ... on Team { organization { login } } } } } } } }`,
    ],
  ];
  it.each(passed)('%s passes', (_label, query, variables) => {
    expect(outcome(gql(query, variables))).toBe('forward');
  });

  const refused: [string, string, unknown?][] = [
    [
      'another repository',
      '{ repository(owner:"other",name:"secret"){ object(expression:"HEAD:.env"){ ... on Blob { text } } } }',
    ],
    [
      'another repository by variables',
      'query($o:String!,$n:String!){ repository(owner:$o,name:$n){ id } }',
      { o: 'other', n: 'secret' },
    ],
    ['a repository by name only', '{ repository(name:"demo"){ id } }'],
    [
      'another repository in a fragment',
      `query { ...Q } fragment Q on Query { repository(owner:"other",name:"secret"){ id } }`,
    ],
    ["an owner's other repository", `{ ${OWN} { owner { repository(name:"secret"){ id } } } }`],
    [
      "an owner's repositories",
      `{ ${OWN} { owner { ... on User { repositories(first:9){ nodes { name } } } } } }`,
    ],
    ["the viewer's repositories", '{ viewer { repositories(first:9){ nodes { name } } } }'],
    ["the viewer's pull requests everywhere", '{ viewer { pullRequests(first:9){ nodes { title } } } }'],
    [
      "an assignee's issues everywhere",
      `{ ${OWN} { pullRequest(number:1){ assignees(first:9){ nodes { issues(first:9){ nodes { title } } } } } } }`,
    ],
    ["a user's organization", '{ user(login:"x"){ organization(login:"other"){ id } } }'],
    ['another organization', '{ organization(login:"other"){ id } }'],
    ['a global search', '{ search(query:"password", type:ISSUE, first:5){ issueCount } }'],
    [
      'a search of another repository',
      '{ search(query:"repo:other/secret", type:ISSUE, first:5){ issueCount } }',
    ],
    [
      "a user's gists (an alias named search is only a name)",
      `{ viewer { search: login } ${OWN} { id } u: user(login:"x"){ gists(first:1){ nodes { name } } } }`,
    ],
    ['resource(url:)', '{ resource(url:"https://github.com/other/secret"){ url } }'],
    ['repositoryOwner', '{ repositoryOwner(login:"other"){ id } }'],
    ['forks', `{ ${OWN} { forks(first:9){ nodes { name } } } }`],
    [
      "a project's items",
      `{ ${OWN} { pullRequest(number:1){ projectItems(first:9){ nodes { project { ... on ProjectV2 { items(first:9){ nodes { id } } } } } } } } }`,
    ],
    [
      "a project's owner",
      `{ ${OWN} { pullRequest(number:1){ projectCards(first:9){ nodes { project { owner { id } } } } } } }`,
    ],
    ['an argument given twice', '{ repository(owner:"acme",name:"demo",name:"secret"){ id } }'],
    ['a subscription', 'subscription { viewer { login } }'],
    ['an undefined fragment', '{ ...Missing }'],
  ];
  it.each(refused)('%s is refused, not recorded', (_label, query, variables) => {
    const p = gql(query, variables);
    expect(outcome(p)).toBe(403);
    expect('refused' in p && p.refused.acts).toBeFalsy();
  });

  it('refuses a GraphQL request with a query string: only the body is judged', () => {
    const body = Buffer.from(JSON.stringify({ query: '{viewer{login}}' }));
    for (const path of ['/graphql?query={viewer{login}}', '/graphql?variables={}', '/graphql?x=1']) {
      const p = plan({ method: 'POST', path, body, encoded: false, apiUrl: API }, SESSION);
      expect(p, path).toMatchObject({
        refused: { status: 400, message: expect.stringContaining('query string') },
      });
    }
  });
});
