import type { ActDetail } from '../../acts/types.js';
import type { GatewaySession, WireAct } from '../types.js';
import { graphqlAccess, type Target } from './graphql-access.js';
import { actsOfParsed } from './graphql-acts.js';
import { parseGraphqlText } from './graphql-document.js';
import { refusedAct } from './judge.js';
import { graphqlUrl } from './lookup.js';
import { otherReadRefusal, restWriteAllowed, restWriteNever } from './rest-access.js';
import { classifyRest, pathSegments, routeWord } from './rest-acts.js';
import { upstreamUrl } from './upstream.js';
import type { ApiAct } from './wire-act.js';

/**
 * What the GitHub API proxy does with one request, decided from the request alone (pure): refuse it
 * (with the refusal recorded as an act when it was a write), or forward it to `url` once its acts
 * are judged by the policy and the nodes its allowed mutations write to are placed in the session's
 * repository. Default deny: see `rest-access.ts` and `graphql-access.ts` for what passes.
 */

export interface Refusal {
  status: number;
  /** Without the `[the-loop gateway]` prefix the answer adds. */
  message: string;
  /** Recorded as refused acts: writes the gateway does not serve. */
  acts?: WireAct[];
}

export type Plan = { refused: Refusal } | { acts: ApiAct[]; targets: Target[]; graphql: boolean; url: URL };

export interface PlanRequest {
  method: string;
  /** The path as the client sent it, query string included. */
  path: string;
  body: Buffer;
  /** The body has a content encoding (it could not be judged). */
  encoded: boolean;
  apiUrl: string;
}

const NOT_ALLOWED = 'gateway: not allowed';
const refuse = (status: number, message: string, acts?: WireAct[]): Plan => ({
  refused: acts ? { status, message, acts } : { status, message },
});

export function plan(req: PlanRequest, session: GatewaySession): Plan {
  const q = req.path.indexOf('?');
  const pathname = q === -1 ? req.path : req.path.slice(0, q);
  const search = q === -1 ? '' : req.path.slice(q);
  if (req.encoded && req.body.length > 0) return refuse(415, 'compressed request bodies are not accepted');
  const segments = pathSegments(pathname);
  if ('error' in segments) return refuse(400, segments.error);
  const query = new URLSearchParams(search);
  // A method override (Rack's `_method`) would make the request another one than the one judged.
  if (query.has('_method')) return refuse(400, 'method overrides are not accepted');
  // `/graphql`, however spelled (`/GraphQL`, `/graphql/`, `/graphql.json`), is judged as GraphQL and
  // sent to the canonical GraphQL URL; anything below it is not an endpoint.
  if (routeWord(segments[0] ?? '') === 'graphql') {
    if (segments.length > 1) return refuse(404, 'not a GitHub API path');
    if (req.method !== 'POST') return refuse(405, 'GraphQL requests are POSTs');
    // Only the body is judged: a server that also read `?query=` or `?variables=` would run
    // something else than what was judged.
    if (search.length > 1) return refuse(400, 'a GraphQL request is judged by its body: no query string');
    return planGraphql(req, session);
  }
  return planRest(req, { pathname, segments, query }, session);
}

function planGraphql(req: PlanRequest, session: GatewaySession): Plan {
  const parsed = parseGraphqlText(req.body.toString('utf8'));
  if ('refused' in parsed) return refuse(400, parsed.refused);
  const found = actsOfParsed(parsed);
  if ('refused' in found) return refuse(400, found.refused);
  const access = graphqlAccess(parsed.entries, session);
  if ('notAllowed' in access) {
    const message = `mutation ${access.notAllowed.join(', ')} is not allowed through the gateway`;
    const acts = access.notAllowed.map((mutation) =>
      refusedAct(
        `POST /graphql ${mutation}`,
        { via: 'GraphQL', httpMethod: 'POST', endpoint: 'graphql', mutation },
        NOT_ALLOWED,
        `mutation ${mutation} is not allowed through the gateway`,
      ),
    );
    return refuse(403, message, acts);
  }
  if ('refused' in access) return refuse(403, access.refused);
  const url = graphqlUrl(req.apiUrl);
  if (!url) return refuse(502, 'no GitHub GraphQL upstream');
  return { acts: found.acts, targets: access.targets, graphql: true, url };
}

interface RestPath {
  pathname: string;
  segments: string[];
  query: URLSearchParams;
}

function planRest(req: PlanRequest, at: RestPath, session: GatewaySession): Plan {
  const { method } = req;
  const read = method === 'GET' || method === 'HEAD';
  let parsed: unknown;
  if (req.body.length > 0) {
    try {
      parsed = JSON.parse(req.body.toString('utf8'));
    } catch {
      if (!read && routeWord(at.segments[0] ?? '') === 'repos') {
        return refuse(400, 'the request body is not JSON');
      }
    }
  }
  const found = classifyRest({ method, path: at.pathname, query: at.query, body: parsed }, session);
  if ('refused' in found) return found;
  const command = `${method} ${at.pathname}`;
  const mine = `${session.owner}/${session.repo}`;
  const foreign = `this session serves ${mine} only, not ${found.repo}`;
  if (read) {
    if (found.repo === undefined) {
      const why = otherReadRefusal(at.segments, at.query, session);
      if (why === 'not allowed through the gateway') return refuse(403, `${command} is ${why}`);
      if (why !== undefined) return refuse(403, `${command}: ${why}`);
    } else if (found.foreign) return refuse(403, foreign);
    return forward(req, found.acts);
  }
  const detail: ActDetail = { via: 'REST', httpMethod: method, endpoint: at.pathname.replace(/^\/+/, '') };
  const notAllowed = () => {
    const message = `${command} is not allowed through the gateway`;
    return refuse(403, message, [refusedAct(command, { ...detail, repo: found.repo }, NOT_ALLOWED, message)]);
  };
  // An act in another repository is judged (and refused) by the policy, which records it.
  if (found.foreign && found.acts.length === 0) {
    const act = refusedAct(command, { ...detail, repo: found.repo }, 'gateway: other repository', foreign);
    return refuse(403, foreign, [act]);
  }
  if (found.repo === undefined) return notAllowed();
  const rest = at.segments.slice(3);
  if (restWriteNever(rest)) return notAllowed();
  if (found.acts.length > 0 || restWriteAllowed(method, rest)) return forward(req, found.acts);
  return notAllowed();
}

function forward(req: PlanRequest, acts: ApiAct[]): Plan {
  const url = upstreamUrl(req.apiUrl, req.path);
  if (!url) return refuse(400, 'not a path under the GitHub API');
  return { acts, targets: [], graphql: false, url };
}
