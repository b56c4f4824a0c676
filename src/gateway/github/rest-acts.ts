import type { ActDetail, ActKind } from '../../acts/types.js';
import { type ApiAct, apiAct, isSessionRepo, type RefOp, refWrite, type SessionRepo } from './wire-act.js';

/**
 * The acts a GitHub REST request is, read from its method, path, query and JSON body (the request
 * itself, not a command line: `src/acts/github-api.ts` knows the same endpoints from `gh api` and
 * `curl` text). Pure.
 *
 * Query parameters count as well as body fields wherever a field decides the act (the branch of a
 * contents write, `force`, `draft`): a server that merges query and body parameters must not be able
 * to move an act past us. Every value found is kept, so two branches are both judged.
 */

export interface RestRequest {
  method: string;
  /** The API path without its query string, e.g. `/repos/acme/demo/pulls/1/merge`. */
  path: string;
  query: URLSearchParams;
  /** The parsed JSON body; undefined when there is none. */
  body: unknown;
}

export type RestClassification =
  | { refused: { status: 400 | 403; message: string } }
  | {
      acts: ApiAct[];
      /** `owner/repo` of a `/repos/{owner}/{repo}/…` path; undefined for other paths. */
      repo: string | undefined;
      /** The path names another repository than the session's: refused, whatever the method. */
      foreign: boolean;
    };

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The path's segments, percent-decoded; an error for paths that could reach somewhere else. */
export function pathSegments(path: string): string[] | { error: string } {
  if (!path.startsWith('/')) return { error: 'the API path must start with /' };
  const raw = path.slice(1).split('/');
  if (raw.length > 1 && raw[raw.length - 1] === '') raw.pop();
  const out: string[] = [];
  for (const [i, part] of raw.entries()) {
    let seg: string;
    try {
      seg = decodeURIComponent(part);
    } catch {
      return { error: 'the API path has a malformed percent-encoding' };
    }
    if (part === '' && raw.length > 1) return { error: 'the API path has an empty segment' };
    if (seg === '.' || seg === '..') return { error: 'the API path has a . or .. segment' };
    // URL parsers turn \ into / in http(s) paths: a backslash could walk to another repository.
    if (seg.includes('\\')) return { error: 'the API path has a backslash' };
    // The route words and the repository must be what they look like: no encoded separators there.
    if (i < 3 && seg.includes('/')) return { error: 'the API path has an encoded / in its first segments' };
    out.push(seg);
  }
  return out;
}

/** Every value a field has, in the JSON body and in the query. */
function fieldValues(req: RestRequest, name: string): string[] {
  const out: string[] = [];
  const body = req.body;
  if (body !== null && typeof body === 'object' && !Array.isArray(body) && name in body) {
    const v = (body as Record<string, unknown>)[name];
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out.push(String(v));
    else if (v !== null && v !== undefined) out.push(JSON.stringify(v));
  }
  out.push(...req.query.getAll(name));
  return out;
}

const first = (req: RestRequest, name: string): string | undefined => fieldValues(req, name)[0];
const isTrue = (req: RestRequest, name: string) =>
  fieldValues(req, name).some((v) => v === 'true' || v === '1');
const isFalse = (req: RestRequest, name: string) =>
  fieldValues(req, name).some((v) => v === 'false' || v === '0');

/**
 * A route word as a server might read it: case folded, without `;params` or a `.json` format
 * suffix (Rails-style routers accept both), so `MERGE`, `merge;x` and `merge.json` are all `merge`.
 */
export const routeWord = (seg: string): string =>
  seg
    .toLowerCase()
    .replace(/;.*$/, '')
    .replace(/\.(json|xml)$/, '');

/** A branch named at the end of a path, and the same without a format suffix a router may strip. */
function pathBranches(name: string): string[] {
  const bare = name.replace(/;.*$/, '').replace(/\.(json|xml)$/i, '');
  return bare === name || bare === '' ? [name] : [name, bare];
}

/** Branches a request names in a field; none: the act's branch is not in the request. */
function branchField(req: RestRequest, name: string): ActDetail {
  const branches = fieldValues(req, name);
  return branches.length > 0 ? { branches } : { protectedUnknown: true };
}

/** Classifies one REST request against the session's repository. */
export function classifyRest(req: RestRequest, session: SessionRepo): RestClassification {
  const seg = pathSegments(req.path);
  if ('error' in seg) return { refused: { status: 400, message: seg.error } };
  const top = routeWord(seg[0] ?? '');
  // `/repositories/{id}/…` reaches any repository by number: its repository cannot be checked here.
  if (top === 'repositories') {
    return {
      refused: { status: 403, message: 'use /repos/{owner}/{repo} paths: /repositories/{id} is not served' },
    };
  }
  if (top !== 'repos' || seg.length < 3) return { acts: [], repo: undefined, foreign: false };
  const repo = `${seg[1]}/${seg[2]}`;
  const foreign = !isSessionRepo(repo, session);
  const method = req.method.toUpperCase();
  if (READS.has(method)) return { acts: [], repo, foreign };
  const command = `${method} ${req.path}`;
  const base: ActDetail = { via: 'REST', httpMethod: method, endpoint: req.path.replace(/^\/+/, ''), repo };
  const found = repoActs(req, method, seg.slice(3));
  const acts = found.map((a) => apiAct(a.kind, command, { ...base, ...a.detail }, a.extra));
  return { acts, repo, foreign };
}

interface Found {
  kind: ActKind;
  detail: ActDetail;
  extra?: Partial<ApiAct>;
}

/** The acts of a write under `/repos/{owner}/{repo}/` (`rest` is what follows the repository). */
function repoActs(req: RestRequest, method: string, rest: string[]): Found[] {
  const [a = '', b, c, d] = rest.map((s, i) => (i < 4 ? routeWord(s) : s));
  if (rest.length === 0) {
    return method === 'DELETE' ? [{ kind: 'repo-delete', detail: {} }] : [];
  }
  switch (a) {
    case 'pulls':
      // PUT pulls/N/merge merges; the base branch is looked up when the policy needs it.
      // (Auto-merge exists only in GraphQL; update-branch merges the base into the head, no act.)
      if (c === 'merge' && rest.length === 3) {
        const pr = rest[1] as string;
        const detail = { pr, mergeMethod: first(req, 'merge_method'), protectedUnknown: true };
        return [{ kind: 'pr-merge', detail, extra: { lookup: { kind: 'pull', number: pr } } }];
      }
      return [];
    case 'merges':
      return [{ kind: 'gh-api-merge', detail: mergeDetail(req) }];
    case 'merge-upstream':
      // Syncs a fork's branch with its upstream: a push onto that branch (what `gh repo sync` does).
      return [{ kind: 'git-push', detail: branchField(req, 'branch'), ...defaultBranch(req, 'branch') }];
    case 'git':
      return b === 'refs' ? refActs(req, method, rest.slice(2)) : [];
    case 'contents':
      // A contents write commits onto `branch`, or onto the default branch when none is given.
      return [{ kind: 'git-push', detail: branchField(req, 'branch'), ...defaultBranch(req, 'branch') }];
    case 'releases':
      return releaseActs(req, method, rest);
    case 'branches':
      return branchActs(method, rest);
    case 'rulesets':
      return [{ kind: 'protection-change', detail: {} }];
    case 'tags':
      return b === 'protection' ? [{ kind: 'protection-change', detail: {} }] : [];
    case 'actions':
      if (b === 'workflows' && d === 'dispatches' && method === 'POST') {
        const detail = { workflow: rest[2], ...refBranch(first(req, 'ref')) };
        return [{ kind: 'workflow-dispatch', detail }];
      }
      return [];
    case 'dispatches':
      return method === 'POST'
        ? [
            {
              kind: 'workflow-dispatch',
              detail: { reason: 'repository_dispatch', action: first(req, 'event_type') },
            },
          ]
        : [];
    case 'transfer':
      // The repository leaves the owner: as final for this session as a deletion.
      return method === 'POST' ? [{ kind: 'repo-delete', detail: { reason: 'transfer' } }] : [];
    default:
      return [];
  }
}

/** When the branch field is absent the write lands on the default branch: look it up. */
function defaultBranch(req: RestRequest, name: string): { extra?: Partial<ApiAct> } {
  return fieldValues(req, name).length === 0 ? { extra: { lookup: { kind: 'default-branch' } } } : {};
}

function mergeDetail(req: RestRequest): ActDetail {
  const into = fieldValues(req, 'base');
  const head = fieldValues(req, 'head');
  return {
    into: into[0],
    // A second `base` (query and body disagreeing) is judged too.
    branches: into.length > 1 ? into.slice(1) : undefined,
    sources: head.length > 0 ? head : undefined,
    protectedUnknown: into.length === 0 || undefined,
  };
}

/** A workflow's ref: a branch (`main`, `refs/heads/main`), or a tag (no protected branch). */
function refBranch(ref: string | undefined): ActDetail {
  if (ref === undefined) return { protectedUnknown: true };
  if (ref.startsWith('refs/tags/')) return { tags: [ref.slice('refs/tags/'.length)] };
  return { branches: [ref.replace(/^refs\/heads\//, '')] };
}

/** `git/refs` (create) and `git/refs/{heads|tags}/{name}` (update, delete). */
function refActs(req: RestRequest, method: string, tail: string[]): Found[] {
  if (tail.length === 0) {
    if (method !== 'POST') return [];
    const refs = fieldValues(req, 'ref');
    if (refs.length === 0) return [refWrite(undefined, 'update')];
    return refs.map((r) => refWrite(r, 'update'));
  }
  const ref = `refs/${tail.join('/')}`;
  let op: RefOp = 'update';
  if (method === 'DELETE') op = 'delete';
  else if (isTrue(req, 'force')) op = 'force';
  const found = refWrite(ref, op);
  const branches = found.detail.branches;
  if (branches?.length === 1) found.detail.branches = pathBranches(branches[0] as string);
  return [found];
}

function releaseActs(req: RestRequest, method: string, rest: string[]): Found[] {
  const detail: ActDetail = {
    tag: first(req, 'tag_name'),
    draft: isTrue(req, 'draft') || undefined,
    prerelease: isTrue(req, 'prerelease') || undefined,
  };
  if (rest.length === 1 && method === 'POST') return [{ kind: 'release-create', detail }];
  // Editing a release with `draft: false` publishes it.
  if (rest.length === 2 && /^\d+$/.test(rest[1] as string) && method === 'PATCH' && isFalse(req, 'draft')) {
    return [{ kind: 'release-create', detail: { ...detail, reason: 'draft published' } }];
  }
  return [];
}

/** `branches/{branch}/protection…` writes change protection; `branches/{branch}/rename` moves a branch away. */
function branchActs(method: string, rest: string[]): Found[] {
  const at = rest.findIndex((s, i) => i >= 2 && routeWord(s) === 'protection');
  if (at >= 2) return [{ kind: 'protection-change', detail: { branches: [rest.slice(1, at).join('/')] } }];
  const last = routeWord(rest[rest.length - 1] ?? '');
  if (rest.length >= 3 && last === 'rename' && method === 'POST') {
    // The old name stops existing, as if deleted (renaming `main` away is what a rule must catch).
    const branch = rest.slice(1, -1).join('/');
    return [{ kind: 'git-delete-branch', detail: { branches: [branch], reason: 'rename' } }];
  }
  return [];
}
