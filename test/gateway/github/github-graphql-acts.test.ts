/**
 * The GraphQL classifier: which mutations are acts, read through aliases, fragments, variables and
 * batches; and hostile bodies, refused rather than forwarded unchecked.
 */
import { describe, expect, it } from 'vitest';
import type { ActDetail, ActKind } from '../../../src/acts/types.js';
import {
  classifyGraphql,
  classifyGraphqlBody,
  GRAPHQL_LIMITS,
  type GraphqlClassification,
} from '../../../src/gateway/github/graphql-acts.js';
import { type ApiAct, withFound } from '../../../src/gateway/github/wire-act.js';

function acts(result: GraphqlClassification): ApiAct[] {
  if ('refused' in result) throw new Error(`refused: ${result.refused}`);
  return result.acts;
}
const one = (query: string, variables?: unknown, operationName?: string) =>
  acts(classifyGraphql({ query, variables, operationName }));

interface Row {
  name: string;
  query: string;
  variables?: Record<string, unknown>;
  kind: ActKind;
  detail: ActDetail;
  lookup?: unknown;
}

const GH_MERGE =
  'mutation PullRequestMerge($input:MergePullRequestInput!){mergePullRequest(input: $input){clientMutationId}}';

const ROWS: Row[] = [
  {
    name: "gh pr merge's mutation, input from variables",
    query: GH_MERGE,
    variables: { input: { pullRequestId: 'PR_1', mergeMethod: 'SQUASH' } },
    kind: 'pr-merge',
    detail: { pr: 'PR_1', mergeMethod: 'squash', protectedUnknown: true },
    lookup: { kind: 'node', id: 'PR_1', type: 'PullRequest' },
  },
  {
    name: 'mergePullRequest with an inline input',
    query: 'mutation{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}',
    kind: 'pr-merge',
    detail: { pr: 'PR_1' },
    lookup: { kind: 'node', id: 'PR_1', type: 'PullRequest' },
  },
  {
    name: 'auto-merge',
    query: 'mutation($id:ID!){enablePullRequestAutoMerge(input:{pullRequestId:$id}){clientMutationId}}',
    variables: { id: 'PR_2' },
    kind: 'pr-merge',
    detail: { pr: 'PR_2', auto: true },
  },
  {
    name: 'the merge queue',
    query: 'mutation{enqueuePullRequest(input:{pullRequestId:"PR_3"}){clientMutationId}}',
    kind: 'pr-merge',
    detail: { pr: 'PR_3', reason: 'merge queue' },
  },
  {
    name: 'mergeBranch',
    query: 'mutation{mergeBranch(input:{repositoryId:"R_1",base:"main",head:"feature"}){clientMutationId}}',
    kind: 'gh-api-merge',
    detail: { into: 'main', sources: ['feature'] },
    lookup: { kind: 'node', id: 'R_1', type: 'Repository' },
  },
  {
    name: 'createRef of a branch',
    query:
      'mutation{createRef(input:{repositoryId:"R_1",name:"refs/heads/topic",oid:"abc"}){clientMutationId}}',
    kind: 'git-push',
    detail: { branches: ['topic'] },
  },
  {
    name: 'createRef of a tag',
    query: 'mutation{createRef(input:{repositoryId:"R_1",name:"refs/tags/v1",oid:"abc"}){clientMutationId}}',
    kind: 'git-push-tags',
    detail: { tags: ['v1'] },
  },
  {
    name: 'updateRef, forced, by node id',
    query: 'mutation{updateRef(input:{refId:"REF_1",oid:"abc",force:true}){clientMutationId}}',
    kind: 'git-force-push',
    detail: { force: true, protectedUnknown: true },
    lookup: { kind: 'node', id: 'REF_1', type: 'Ref' },
  },
  {
    name: 'deleteRef',
    query: 'mutation{deleteRef(input:{refId:"REF_1"}){clientMutationId}}',
    kind: 'git-delete-branch',
    detail: { protectedUnknown: true },
    lookup: { kind: 'node', id: 'REF_1', type: 'Ref' },
  },
  {
    name: 'createCommitOnBranch',
    query: 'mutation($i:CreateCommitOnBranchInput!){createCommitOnBranch(input:$i){commit{oid}}}',
    variables: {
      i: { branch: { repositoryNameWithOwner: 'acme/demo', branchName: 'main' }, expectedHeadOid: 'a' },
    },
    kind: 'git-push',
    detail: { branches: ['main'], repo: 'acme/demo' },
  },
  {
    name: 'a branch protection rule',
    query:
      'mutation{createBranchProtectionRule(input:{repositoryId:"R_1",pattern:"main"}){clientMutationId}}',
    kind: 'protection-change',
    detail: {},
    lookup: { kind: 'node', id: 'R_1', type: 'Repository' },
  },
  {
    name: 'a ruleset deleted',
    query: 'mutation{deleteRepositoryRuleset(input:{repositoryRulesetId:"RRS_1"}){clientMutationId}}',
    kind: 'protection-change',
    detail: {},
    lookup: { kind: 'node', id: 'RRS_1', type: 'RepositoryRuleset' },
  },
];

describe('GraphQL acts', () => {
  it.each(ROWS)('$name → $kind', (row) => {
    const found = one(row.query, row.variables);
    expect(found).toHaveLength(1);
    const act = found[0] as ApiAct;
    expect(act.kind).toBe(row.kind);
    expect(act.detail).toMatchObject({
      via: 'GraphQL',
      httpMethod: 'POST',
      endpoint: 'graphql',
      ...row.detail,
    });
    if (row.lookup) expect(act.lookup).toEqual(row.lookup);
    expect(act.result).toEqual({ index: null, key: act.detail.mutation });
  });

  it('lets mutations that are not acts, and queries, through', () => {
    expect(one('mutation{addComment(input:{subjectId:"I_1",body:"hi"}){clientMutationId}}')).toEqual([]);
    expect(
      one('mutation($i:CreatePullRequestInput!){createPullRequest(input:$i){pullRequest{url}}}'),
    ).toEqual([]);
    expect(one('query{viewer{login}}')).toEqual([]);
    expect(one('{ repository(owner:"acme",name:"demo"){ mergePullRequest: id } }')).toEqual([]);
  });

  it('updateRefs is one act per ref update', () => {
    const found = one(
      'mutation($u:[RefUpdate!]!){updateRefs(input:{repositoryId:"R_1",refUpdates:$u}){clientMutationId}}',
      {
        u: [
          { name: 'refs/heads/topic', afterOid: 'abc' },
          { name: 'refs/heads/main', afterOid: 'abc', force: true },
          { name: 'refs/heads/old', afterOid: '0000000000000000000000000000000000000000' },
          { name: 'refs/tags/v9', afterOid: 'abc' },
        ],
      },
    );
    expect(found.map((a) => [a.kind, a.detail.branches ?? a.detail.tags])).toEqual([
      ['git-push', ['topic']],
      ['git-force-push', ['main']],
      ['git-delete-branch', ['old']],
      ['git-push-tags', ['v9']],
    ]);
  });

  it('reads aliases, fragments, inline fragments and variable defaults', () => {
    const aliased = one(
      'mutation{ a: addComment(input:{}){clientMutationId} m1: mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId} }',
    );
    expect(aliased.map((a) => a.result?.key)).toEqual(['m1']);
    expect(aliased[0]?.command).toBe('POST /graphql m1: mergePullRequest');
    const hidden = one(
      'mutation { ...A } fragment A on Mutation { ... on Mutation { ...B } } fragment B on Mutation { x: mergeBranch(input:{base:"main",head:"f"}) { clientMutationId } }',
    );
    expect(hidden).toHaveLength(1);
    expect(hidden[0]).toMatchObject({ kind: 'gh-api-merge', detail: { into: 'main' }, result: { key: 'x' } });
    const defaults = one(
      'mutation M($id: ID = "PR_9") { mergePullRequest(input:{pullRequestId:$id}) { clientMutationId } }',
    );
    expect(defaults[0]?.detail.pr).toBe('PR_9');
    const cyclic = one(
      'mutation { ...A } fragment A on Mutation { ...A mergePullRequest(input:{pullRequestId:"P"}) { clientMutationId } }',
    );
    expect(cyclic).toHaveLength(1);
  });

  it('checks every operation of a document, whatever operationName says', () => {
    const doc = `query Harmless { viewer { login } } ${GH_MERGE.replace('PullRequestMerge', 'Sneaky')}`;
    const found = one(doc, { input: { pullRequestId: 'PR_1' } }, 'Harmless');
    expect(found.map((a) => a.kind)).toEqual(['pr-merge']);
    const two = one(
      'mutation A { mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId} } mutation B { deleteRef(input:{refId:"REF_1"}){clientMutationId} }',
      undefined,
      'A',
    );
    expect(two.map((a) => a.kind)).toEqual(['pr-merge', 'git-delete-branch']);
  });

  it('classifies a batch, each act settled from its own entry', () => {
    const batch = classifyGraphql([
      { query: 'query { viewer { login } }' },
      { query: GH_MERGE, variables: { input: { pullRequestId: 'PR_1' } } },
    ]);
    expect(batch).toMatchObject({ batch: true });
    expect(acts(batch).map((a) => [a.kind, a.result])).toEqual([
      ['pr-merge', { index: 1, key: 'mergePullRequest' }],
    ]);
  });

  it('takes variables sent as a JSON string', () => {
    const found = one(GH_MERGE, JSON.stringify({ input: { pullRequestId: 'PR_5' } }));
    expect(found[0]?.detail.pr).toBe('PR_5');
  });

  it('refuses hostile and malformed bodies', () => {
    const refusals: [string, unknown][] = [
      ['not JSON', 'mutation { mergePullRequest }'],
      ['empty batch', '[]'],
      ['a number', '42'],
      ['null', 'null'],
      ['query not a string', JSON.stringify({ query: 42 })],
      ['no query', JSON.stringify({ variables: {} })],
      ['syntax error', JSON.stringify({ query: 'mutation { mergePullRequest(input: { }' })],
      ['variables of the wrong type', JSON.stringify({ query: GH_MERGE, variables: [1] })],
      ['variables an unparseable string', JSON.stringify({ query: GH_MERGE, variables: '{nope' })],
      ['operationName not a string', JSON.stringify({ query: GH_MERGE, operationName: 7 })],
      ['undefined fragment', JSON.stringify({ query: 'mutation { ...Missing }' })],
      [
        'a fragment defined twice',
        JSON.stringify({
          query:
            'mutation { ...A } fragment A on Mutation { x } fragment A on Mutation { mergePullRequest(input:{}) { c } }',
        }),
      ],
      ['type definitions', JSON.stringify({ query: 'type Mutation { x: Int }' })],
      [
        'batch with a bad entry',
        JSON.stringify([{ query: 'query{viewer{login}}' }, { query: 'mutation {' }]),
      ],
      [
        'batch too long',
        JSON.stringify(
          Array.from({ length: GRAPHQL_LIMITS.batch + 1 }, () => ({ query: '{viewer{login}}' })),
        ),
      ],
      // Under the token limit, but deeper than the parser's stack: refused, not a crash.
      ['deeply nested', JSON.stringify({ query: `mutation{${'a{'.repeat(5_000)}b${'}'.repeat(5_001)}` })],
      [
        'deeply nested input',
        JSON.stringify({
          query: `mutation{mergePullRequest(input:${'{a:'.repeat(5_000)}1${'}'.repeat(5_000)}){c}}`,
        }),
      ],
      ['too many tokens', JSON.stringify({ query: `mutation{${'a '.repeat(GRAPHQL_LIMITS.tokens + 10)}}` })],
      ['too long', JSON.stringify({ query: `#${'x'.repeat(GRAPHQL_LIMITS.queryChars)}\nmutation{a}` })],
    ];
    for (const [label, body] of refusals) {
      const result = classifyGraphqlBody(body as string);
      expect(result, label).toHaveProperty('refused');
    }
  });

  it('a batch mixing a query and a mutation, or two mutations in one document, yields every act', () => {
    const mixed = acts(
      classifyGraphqlBody(
        JSON.stringify([
          { query: '{ viewer { login } }' },
          {
            query:
              'mutation { a: mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId} b: createRef(input:{repositoryId:"R",name:"refs/heads/main",oid:"x"}){clientMutationId} }',
          },
        ]),
      ),
    );
    expect(mixed.map((a) => [a.kind, a.result?.index, a.result?.key])).toEqual([
      ['pr-merge', 1, 'a'],
      ['git-push', 1, 'b'],
    ]);
  });

  it('a ref placed by its lookup takes the kind it turns out to have', () => {
    const update = one('mutation{updateRef(input:{refId:"REF_1",oid:"abc"}){clientMutationId}}')[0] as ApiAct;
    const tag = withFound(update, { repo: 'acme/demo', ref: 'refs/tags/v1' });
    expect(tag.kind).toBe('git-push-tags');
    expect(tag.repoUnverified).toBeUndefined();
    const branch = withFound(update, { repo: 'acme/demo', ref: 'refs/heads/main' });
    expect(branch).toMatchObject({ kind: 'git-push', detail: { branches: ['main'], repo: 'acme/demo' } });
    expect(branch.detail.protectedUnknown).toBeUndefined();
    expect(withFound(update, undefined)).toEqual(update);
  });
});
