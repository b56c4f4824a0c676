import type { Agent } from 'node:http';
import type { GitHubUpstream } from '../types.js';
import { requestJson, upstreamUrl } from './upstream.js';
import type { Found, Lookup, NodeType, SessionRepo } from './wire-act.js';

/**
 * Lookups the gateway makes with the real token before judging an act whose target is not in the
 * request: the base branch of a pull request (REST by number, GraphQL by node id), the default
 * branch a contents write lands on, the repository of a node. A failed lookup finds nothing: the
 * act stays uncertain, and the policy refuses what it cannot place.
 */

/** GraphQL: at `/graphql` beside github.com's API, at `/api/graphql` beside GitHub Enterprise's `/api/v3`. */
export function graphqlUrl(apiUrl: string): URL | undefined {
  const base = apiUrl.replace(/\/+$/, '');
  const enterprise = /\/api\/v3$/.exec(base);
  if (!enterprise) return upstreamUrl(base, '/graphql');
  try {
    return new URL(`${base.slice(0, enterprise.index)}/api/graphql`);
  } catch {
    return undefined;
  }
}

const NODE_FIELDS: Record<NodeType, string> = {
  PullRequest: '... on PullRequest { baseRefName repository { nameWithOwner } }',
  Ref: '... on Ref { name prefix repository { nameWithOwner } }',
  Repository: '... on Repository { nameWithOwner }',
  BranchProtectionRule: '... on BranchProtectionRule { repository { nameWithOwner } }',
  RepositoryRuleset: '... on RepositoryRuleset { source { __typename ... on Repository { nameWithOwner } } }',
  // Review threads have a repository without being a RepositoryNode.
  RepositoryNode: [
    '... on Repository { nameWithOwner }',
    '... on RepositoryNode { repository { nameWithOwner } }',
    '... on PullRequestReviewThread { repository { nameWithOwner } }',
  ].join(' '),
};

const nodeQuery = (type: NodeType): string =>
  `query TheLoopGatewayLookup($id: ID!) { node(id: $id) { __typename ${NODE_FIELDS[type]} } }`;

const record = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** What a node lookup's answer says (pure). */
export function foundInNode(type: NodeType, json: unknown): Found | undefined {
  const node = record(record(record(json).data).node);
  if (type === 'RepositoryNode') {
    const repo = node.__typename === 'Repository' ? text(node.nameWithOwner) : undefined;
    return { repo: repo ?? text(record(node.repository).nameWithOwner) };
  }
  if (node.__typename !== type) return undefined;
  const repoOf = (holder: unknown) => text(record(record(holder).repository).nameWithOwner);
  switch (type) {
    case 'PullRequest':
      return { repo: repoOf(node), branch: text(node.baseRefName) };
    case 'Ref': {
      const name = text(node.name);
      const prefix = text(node.prefix) ?? '';
      return { repo: repoOf(node), ref: name === undefined ? undefined : `${prefix}${name}` };
    }
    case 'Repository':
      return { repo: text(node.nameWithOwner) };
    case 'BranchProtectionRule':
      return { repo: repoOf(node) };
    case 'RepositoryRuleset': {
      const source = record(node.source);
      return { repo: source.__typename === 'Repository' ? text(source.nameWithOwner) : undefined };
    }
  }
}

export interface LookupContext {
  github: GitHubUpstream;
  /** The credential the session's requests carry upstream (asked once per request). */
  token: string | undefined;
  session: SessionRepo;
  timeoutMs: number;
  /** The connection pool for a URL (the handler's keep-alive agents). */
  agentFor?: (url: URL) => Agent | undefined;
}

/** Runs one lookup against the upstream; undefined when it fails or finds nothing. */
export async function lookUp(lookup: Lookup, ctx: LookupContext): Promise<Found | undefined> {
  const { github, session, timeoutMs, token } = ctx;
  const agent = (url: URL) => ctx.agentFor?.(url);
  const repoPath = `/repos/${encodeURIComponent(session.owner)}/${encodeURIComponent(session.repo)}`;
  const get = async (path: string) => {
    const url = upstreamUrl(github.apiUrl, path);
    if (!url) return undefined;
    const answer = await requestJson(url, {
      method: 'GET',
      token,
      timeoutMs,
      agent: agent(url),
    });
    return answer && answer.status === 200 ? record(answer.json) : undefined;
  };
  switch (lookup.kind) {
    case 'pull': {
      if (!/^\d{1,12}$/.test(lookup.number)) return undefined;
      const pull = await get(`${repoPath}/pulls/${lookup.number}`);
      if (!pull) return undefined;
      const base = record(pull.base);
      return { repo: text(record(base.repo).full_name), branch: text(base.ref) };
    }
    case 'default-branch': {
      const repo = await get(repoPath);
      return repo ? { repo: text(repo.full_name), branch: text(repo.default_branch) } : undefined;
    }
    case 'node': {
      const url = graphqlUrl(github.apiUrl);
      if (!url) return undefined;
      const body = { query: nodeQuery(lookup.type), variables: { id: lookup.id } };
      const answer = await requestJson(url, {
        method: 'POST',
        token,
        body,
        timeoutMs,
        agent: agent(url),
      });
      return answer && answer.status === 200 ? foundInNode(lookup.type, answer.json) : undefined;
    }
  }
}
