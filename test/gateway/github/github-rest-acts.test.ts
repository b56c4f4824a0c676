/**
 * The REST classifier: which requests are acts (and with what detail), which paths are another
 * repository's, and which paths are refused before anything else is looked at.
 */
import { describe, expect, it } from 'vitest';
import { decide, resolvePolicy } from '../../../src/acts/policy.js';
import type { ActDetail, ActKind } from '../../../src/acts/types.js';
import { classifyRest, pathSegments } from '../../../src/gateway/github/rest-acts.js';
import { upstreamUrl } from '../../../src/gateway/github/upstream.js';
import { withFound } from '../../../src/gateway/github/wire-act.js';

const session = { owner: 'acme', repo: 'demo' };

function classify(method: string, path: string, body?: unknown) {
  const q = path.indexOf('?');
  const query = new URLSearchParams(q === -1 ? '' : path.slice(q));
  const result = classifyRest({ method, path: q === -1 ? path : path.slice(0, q), query, body }, session);
  if ('refused' in result) throw new Error(`refused: ${result.refused.message}`);
  return result;
}

interface Row {
  method: string;
  path: string;
  body?: unknown;
  kind: ActKind;
  detail: ActDetail;
  lookup?: unknown;
}

const ACTS: Row[] = [
  {
    method: 'PUT',
    path: '/repos/acme/demo/pulls/1/merge',
    body: { merge_method: 'squash' },
    kind: 'pr-merge',
    detail: { pr: '1', mergeMethod: 'squash', protectedUnknown: true },
    lookup: { kind: 'pull', number: '1' },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/merges',
    body: { base: 'main', head: 'feature' },
    kind: 'gh-api-merge',
    detail: { into: 'main', sources: ['feature'] },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/merges',
    body: { head: 'feature' },
    kind: 'gh-api-merge',
    detail: { protectedUnknown: true },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/git/refs',
    body: { ref: 'refs/heads/topic', sha: 'abc' },
    kind: 'git-push',
    detail: { branches: ['topic'], ref: 'refs/heads/topic' },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/git/refs',
    body: { ref: 'refs/tags/v1.0.0', sha: 'abc' },
    kind: 'git-push-tags',
    detail: { tags: ['v1.0.0'] },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/git/refs',
    body: { sha: 'abc' },
    kind: 'git-push',
    detail: { protectedUnknown: true },
  },
  {
    method: 'PATCH',
    path: '/repos/acme/demo/git/refs/heads/main',
    body: { sha: 'abc' },
    kind: 'git-push',
    detail: { branches: ['main'], ref: 'refs/heads/main' },
  },
  {
    method: 'PATCH',
    path: '/repos/acme/demo/git/refs/heads/feature/x',
    body: { sha: 'abc', force: true },
    kind: 'git-force-push',
    detail: { branches: ['feature/x'], force: true },
  },
  {
    method: 'DELETE',
    path: '/repos/acme/demo/git/refs/heads/main',
    kind: 'git-delete-branch',
    detail: { branches: ['main'] },
  },
  {
    method: 'DELETE',
    path: '/repos/acme/demo/git/refs/tags/v1',
    kind: 'git-delete-branch',
    detail: { branches: [], tags: ['v1'] },
  },
  {
    method: 'PUT',
    path: '/repos/acme/demo/contents/README.md',
    body: { message: 'm', content: 'eA==', branch: 'docs' },
    kind: 'git-push',
    detail: { branches: ['docs'] },
  },
  {
    method: 'DELETE',
    path: '/repos/acme/demo/contents/a/b.txt',
    body: { message: 'm', sha: 'abc' },
    kind: 'git-push',
    detail: { protectedUnknown: true },
    lookup: { kind: 'default-branch' },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/merge-upstream',
    body: { branch: 'main' },
    kind: 'git-push',
    detail: { branches: ['main'] },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/releases',
    body: { tag_name: 'v2', draft: true },
    kind: 'release-create',
    detail: { tag: 'v2', draft: true },
  },
  {
    method: 'PATCH',
    path: '/repos/acme/demo/releases/42',
    body: { draft: false },
    kind: 'release-create',
    detail: { reason: 'draft published' },
  },
  { method: 'DELETE', path: '/repos/acme/demo', kind: 'repo-delete', detail: { repo: 'acme/demo' } },
  {
    method: 'POST',
    path: '/repos/acme/demo/transfer',
    body: { new_owner: 'x' },
    kind: 'repo-delete',
    detail: {},
  },
  {
    method: 'PUT',
    path: '/repos/acme/demo/branches/main/protection',
    body: {},
    kind: 'protection-change',
    detail: { branches: ['main'] },
  },
  {
    method: 'DELETE',
    path: '/repos/acme/demo/branches/main/protection/required_signatures',
    kind: 'protection-change',
    detail: { branches: ['main'] },
  },
  { method: 'PUT', path: '/repos/acme/demo/rulesets/7', body: {}, kind: 'protection-change', detail: {} },
  { method: 'POST', path: '/repos/acme/demo/rulesets', body: {}, kind: 'protection-change', detail: {} },
  {
    method: 'POST',
    path: '/repos/acme/demo/actions/workflows/deploy.yml/dispatches',
    body: { ref: 'main' },
    kind: 'workflow-dispatch',
    detail: { workflow: 'deploy.yml', branches: ['main'] },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/dispatches',
    body: { event_type: 'deploy' },
    kind: 'workflow-dispatch',
    detail: { action: 'deploy' },
  },
  {
    method: 'POST',
    path: '/repos/acme/demo/branches/main/rename',
    body: { new_name: 'old' },
    kind: 'git-delete-branch',
    detail: { branches: ['main'], reason: 'rename' },
  },
];

describe('REST acts', () => {
  it.each(ACTS)('$method $path is $kind', (row) => {
    const { acts, foreign } = classify(row.method, row.path, row.body);
    expect(foreign).toBe(false);
    expect(acts).toHaveLength(1);
    const act = acts[0];
    expect(act?.kind).toBe(row.kind);
    expect(act?.command).toBe(`${row.method} ${row.path}`);
    expect(act?.detail).toMatchObject({
      via: 'REST',
      httpMethod: row.method,
      repo: 'acme/demo',
      endpoint: row.path.slice(1),
      ...row.detail,
    });
    if (row.lookup) expect(act?.lookup).toEqual(row.lookup);
    else expect(act?.lookup).toBeUndefined();
  });

  const NOT_ACTS: [string, string, unknown][] = [
    ['GET', '/repos/acme/demo/pulls/1/merge', undefined],
    ['GET', '/repos/acme/demo', undefined],
    ['HEAD', '/repos/acme/demo/git/refs/heads/main', undefined],
    ['POST', '/repos/acme/demo/pulls', { title: 't', head: 'feature', base: 'main' }],
    ['PATCH', '/repos/acme/demo/pulls/1', { base: 'main' }],
    ['PUT', '/repos/acme/demo/pulls/1/update-branch', {}],
    ['PUT', '/repos/acme/demo/pulls/1/auto-merge', {}],
    ['POST', '/repos/acme/demo/issues/1/comments', { body: 'hi' }],
    ['POST', '/repos/acme/demo/issues/1/labels', ['bug']],
    ['PATCH', '/repos/acme/demo/releases/42', { name: 'renamed' }],
    ['POST', '/repos/acme/demo/releases/generate-notes', { tag_name: 'v1' }],
    ['POST', '/repos/acme/demo/git/blobs', { content: 'x' }],
    ['GET', '/user', undefined],
    ['POST', '/user/repos', { name: 'new' }],
    ['GET', '/search/issues?q=x', undefined],
  ];
  it.each(NOT_ACTS)('%s %s is not an act', (method, path, body) => {
    expect(classify(method, path, body).acts).toEqual([]);
  });

  it('reads the query as well as the body, and judges every branch named', () => {
    const { acts } = classify('PUT', '/repos/acme/demo/contents/x?branch=main', { branch: 'docs' });
    expect(acts[0]?.detail.branches).toEqual(['docs', 'main']);
    const policy = resolvePolicy(undefined, { acts: { 'git-push': 'deny-protected' } }, 'main');
    expect(decide(acts[0] as (typeof acts)[number], policy).verdict).toBe('deny');
    const forced = classify('PATCH', '/repos/acme/demo/git/refs/heads/topic?force=true', { sha: 'a' });
    expect(forced.acts[0]?.kind).toBe('git-force-push');
  });

  it('reads route words as a lenient router would (case, ;params, a .json suffix)', () => {
    for (const path of [
      '/repos/acme/demo/pulls/1/MERGE',
      '/repos/acme/demo/pulls/1/merge;x',
      '/repos/acme/demo/pulls/1/merge.json',
      '/repos/acme/demo/pulls/1/merge/',
      '/repos/acme/demo/pulls/1/%6derge',
    ]) {
      expect(
        classify('PUT', path, {}).acts.map((a) => a.kind),
        path,
      ).toEqual(['pr-merge']);
    }
    const ref = classify('PATCH', '/repos/acme/demo/git/refs/heads/main.json', { sha: 'a' }).acts[0];
    expect(ref?.detail.branches).toEqual(['main.json', 'main']);
  });

  it('names another repository whatever the method, and compares names case-insensitively', () => {
    expect(classify('GET', '/repos/other/repo', undefined)).toMatchObject({ foreign: true, acts: [] });
    expect(classify('GET', '/repos/ACME/Demo/pulls', undefined)).toMatchObject({ foreign: false });
    const merge = classify('PUT', '/repos/other/repo/pulls/3/merge', {});
    expect(merge.foreign).toBe(true);
    expect(merge.acts[0]).toMatchObject({ kind: 'pr-merge', detail: { repo: 'other/repo' } });
    expect(classify('GET', '/user', undefined)).toMatchObject({ foreign: false, repo: undefined });
  });

  it('refuses paths that could reach somewhere other than they say', () => {
    const bad = [
      '/repos/acme/demo/../../repos/other/repo',
      '/repos/acme/demo/%2e%2e/x',
      '/repos/acme%2Fdemo/x/pulls/1/merge',
      '/repos//acme/demo',
      '/repos/acme/demo/%E0%A4%A',
      'repos/acme/demo',
      '/repos/acme/demo/pulls\\..\\..\\..\\..\\other\\repo\\pulls\\1\\merge',
      '/repos/acme/demo/pulls/1/%5c..%5cmerge',
    ];
    for (const path of bad) {
      const result = classifyRest({ method: 'PUT', path, query: new URLSearchParams(), body: {} }, session);
      expect(result, path).toMatchObject({ refused: { status: 400 } });
    }
    const byId = classifyRest(
      { method: 'PUT', path: '/repositories/123/pulls/1/merge', query: new URLSearchParams(), body: {} },
      session,
    );
    expect(byId).toMatchObject({ refused: { status: 403 } });
    expect(pathSegments('/repos/acme/demo/git/refs/heads/feature%2Fx')).toEqual([
      'repos',
      'acme',
      'demo',
      'git',
      'refs',
      'heads',
      'feature/x',
    ]);
  });

  it('never sends a request anywhere but where it was judged', () => {
    const api = 'https://api.github.com';
    expect(upstreamUrl(api, '/repos/acme/demo/pulls/1/merge?x=1')?.href).toBe(
      'https://api.github.com/repos/acme/demo/pulls/1/merge?x=1',
    );
    expect(upstreamUrl('https://ghe.example/api/v3', '/repos/acme/demo')?.href).toBe(
      'https://ghe.example/api/v3/repos/acme/demo',
    );
    for (const path of [
      '/repos/acme/demo/pulls\\..\\..\\..\\..\\other\\repo',
      '/repos/acme/demo/%2e%2e/%2e%2e/other/repo',
      '/repos/acme/demo/x#/../../other',
      '@evil.example/x',
    ]) {
      expect(upstreamUrl(api, path), path).toBeUndefined();
    }
  });

  it('places an act once its lookup answers (pull request base, default branch)', () => {
    const merge = classify('PUT', '/repos/acme/demo/pulls/1/merge', {}).acts[0];
    const placed = withFound(merge as NonNullable<typeof merge>, { repo: 'acme/demo', branch: 'main' });
    expect(placed.detail).toMatchObject({ into: 'main' });
    expect(placed.detail.protectedUnknown).toBeUndefined();
    const policy = resolvePolicy(undefined, { acts: { 'pr-merge': 'deny-protected' } }, 'main');
    expect(decide(merge as NonNullable<typeof merge>, policy).verdict).toBe('deny');
    expect(decide(placed, policy).verdict).toBe('deny');
    const feature = withFound(merge as NonNullable<typeof merge>, { branch: 'release' });
    expect(decide(feature, policy).verdict).toBe('allow');
    const contents = classify('PUT', '/repos/acme/demo/contents/x', { content: '' }).acts[0];
    const onDefault = withFound(contents as NonNullable<typeof contents>, { branch: 'main' });
    expect(onDefault.detail.branches).toEqual(['main']);
  });
});
