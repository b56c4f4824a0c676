import { compact, type Handler, has, isProtected, parseOptions, type Run, value } from './context.js';
import type { Arg } from './expand.js';
import type { ActDetail } from './types.js';

/**
 * GitHub API requests, made with `gh api` (github.ts) or `curl`: REST by method and path (merges,
 * refs, contents, releases, workflow dispatches, branch protection, repository deletion), GraphQL by
 * the mutations it names.
 */

const CURL_VALUED = new Set(
  (
    '-X --request -d --data --data-raw --data-binary --data-ascii --data-urlencode --json -H --header -u --user ' +
    '-o --output -F --form --form-string --url -A --user-agent -e --referer -b --cookie -c --cookie-jar -w ' +
    '--write-out -m --max-time --connect-timeout -x --proxy -T --upload-file --retry -r --range -K --config ' +
    '--cacert --cert --key -E --resolve --variable --expand-url'
  ).split(' '),
);
const GITHUB_API = /^(?:https?:\/\/)?(?:api\.github\.com(?=\/|$)|[^/]+\/api\/(?:v3\/|graphql))/i;

export const classifyCurl: Handler = (run) => {
  const o = parseOptions(run.args, CURL_VALUED);
  const urls = [...o.positionals.map((a) => a.text), ...(o.values.get('--url') ?? [])].filter((u) =>
    GITHUB_API.test(u),
  );
  if (urls.length === 0) return;
  const data = [
    '-d',
    '--data',
    '--data-raw',
    '--data-binary',
    '--data-ascii',
    '--data-urlencode',
    '--json',
  ].flatMap((n) => o.values.get(n) ?? []);
  const body = data.join('&');
  const explicit = value(o, '-X', '--request');
  const method = (
    explicit ??
    (has(o, '-G', '--get') ? 'GET' : data.length > 0 ? 'POST' : has(o, '-T', '--upload-file') ? 'PUT' : 'GET')
  ).toUpperCase();
  const fields = jsonFields(body);
  for (const url of urls) apiCall(run, { method, endpoint: url, fields, body, via: 'curl' });
};

function jsonFields(body: string): Map<string, string> {
  const out = new Map<string, string>();
  if (!body.trimStart().startsWith('{')) return out;
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      for (const [k, v] of Object.entries(parsed)) out.set(k, typeof v === 'string' ? v : JSON.stringify(v));
    }
  } catch {
    // Not JSON (or not whole): GraphQL detection still reads the raw body.
  }
  return out;
}

export interface ApiCall {
  method: string;
  endpoint: Arg | string;
  fields: Map<string, string>;
  body: string | undefined;
  via: string;
}

const GRAPHQL_MUTATIONS: Record<
  string,
  'gh-api-merge' | 'git-delete-branch' | 'git-push' | 'protection-change'
> = {
  mergePullRequest: 'gh-api-merge',
  enablePullRequestAutoMerge: 'gh-api-merge',
  mergeBranch: 'gh-api-merge',
  deleteRef: 'git-delete-branch',
  updateRef: 'git-push',
  updateRefs: 'git-push',
  createRef: 'git-push',
  createCommitOnBranch: 'git-push',
  createBranchProtectionRule: 'protection-change',
  updateBranchProtectionRule: 'protection-change',
  deleteBranchProtectionRule: 'protection-change',
  createRepositoryRuleset: 'protection-change',
  updateRepositoryRuleset: 'protection-change',
  deleteRepositoryRuleset: 'protection-change',
};
const MUTATION = new RegExp(`\\b(${Object.keys(GRAPHQL_MUTATIONS).join('|')})\\s*\\(`, 'g');

/** Classifies one GitHub API request by method and path (REST) or mutation names (GraphQL). */
export function apiCall(run: Run, call: ApiCall): void {
  const raw = typeof call.endpoint === 'string' ? call.endpoint : call.endpoint.text;
  const path = raw
    .replace(/^https?:\/\/[^/]+/i, '')
    .replace(/^[^/]*\.[^/]+(?=\/)/, '') // host without a scheme
    .replace(/^\/+/, '')
    .replace(/^api\/v3\//, '')
    .replace(/^api\/(?=graphql)/, '')
    .split(/[?#]/)[0] as string;
  const base: ActDetail = { via: call.via, httpMethod: call.method, endpoint: path };
  if (path === 'graphql') {
    graphql(run, call, base);
    return;
  }
  const seg = path.split('/');
  if (seg[0] !== 'repos' || seg.length < 3) return;
  const repo = `${seg[1]}/${seg[2]}`;
  const rest = seg.slice(3);
  const read = call.method === 'GET' || call.method === 'HEAD';
  const f = call.fields;
  const detail = { ...base, repo };
  const guard = (branch: string | undefined): ActDetail =>
    branch === undefined
      ? { protectedUnknown: true }
      : { branches: [branch], protected: isProtected(branch, run.settings.protectedBranches) };
  if (rest.length === 0) {
    if (call.method === 'DELETE') run.emit('repo-delete', detail);
    return;
  }
  if (read) return;
  const [a, b, c, d] = rest;
  // PUT /repos/o/r/pulls/N/merge merges (GET on it only asks whether the PR is merged).
  if (a === 'pulls' && c === 'merge') {
    run.emit(
      'gh-api-merge',
      compact({ ...detail, pr: b, mergeMethod: f.get('merge_method'), protectedUnknown: true }),
    );
  } else if (a === 'merges') {
    run.emit(
      'gh-api-merge',
      compact({
        ...detail,
        sources: f.has('head') ? [f.get('head') as string] : undefined,
        ...guard(f.get('base')),
      }),
    );
  } else if (a === 'git' && b === 'refs') {
    const ref = rest.slice(2).join('/') || (f.get('ref') ?? '').replace(/^refs\//, '');
    const isTag = ref.startsWith('tags/');
    const name = ref.replace(/^(heads|tags)\//, '');
    if (call.method === 'DELETE') {
      run.emit(
        'git-delete-branch',
        isTag ? { ...detail, branches: [], tags: [name] } : { ...detail, ...guard(name) },
      );
    } else if (isTag) run.emit('git-push-tags', { ...detail, tags: [name] });
    else {
      const force = f.get('force') === 'true';
      run.emit(
        force ? 'git-force-push' : 'git-push',
        compact({ ...detail, force: force || undefined, ...guard(name) }),
      );
    }
  } else if (a === 'contents') {
    // PUT/DELETE contents commit straight onto a branch (the default branch when none is given).
    run.emit('git-push', { ...detail, ...guard(f.get('branch')) });
  } else if (a === 'releases' && (rest.length === 1 || f.get('draft') === 'false')) {
    run.emit(
      'release-create',
      compact({ ...detail, tag: f.get('tag_name'), draft: f.get('draft') === 'true' || undefined }),
    );
  } else if (a === 'actions' && b === 'workflows' && d === 'dispatches') {
    run.emit(
      'workflow-dispatch',
      compact({ ...detail, workflow: c, branches: f.has('ref') ? [f.get('ref') as string] : undefined }),
    );
  } else if ((a === 'branches' && c === 'protection') || a === 'rulesets') {
    run.emit('protection-change', compact({ ...detail, ...(a === 'branches' ? guard(b) : {}) }));
  }
}

function graphql(run: Run, call: ApiCall, base: ActDetail): void {
  const query = call.fields.get('query') ?? call.body ?? '';
  if (query.startsWith('@')) {
    run.emit('dynamic-command', { ...base, reason: 'GraphQL query read from a file' });
    return;
  }
  const seen = new Set<string>();
  for (const match of query.matchAll(MUTATION)) {
    const mutation = match[1] as string;
    if (seen.has(mutation)) continue;
    seen.add(mutation);
    const kind = GRAPHQL_MUTATIONS[mutation];
    if (!kind) continue;
    run.emit(
      kind,
      compact({
        ...base,
        mutation,
        auto: mutation === 'enablePullRequestAutoMerge' || undefined,
        protectedUnknown: kind === 'protection-change' ? undefined : true,
      }),
    );
  }
}
