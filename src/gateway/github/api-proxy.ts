import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { GatewayHandler, GatewayPorts, GatewaySession } from '../types.js';
import { classifyGraphqlBody } from './graphql-acts.js';
import { graphqlOutcome, type Judged, judgeActs, restOutcome, type Settled, wireAct } from './judge.js';
import { graphqlUrl } from './lookup.js';
import { classifyRest, pathSegments, routeWord } from './rest-acts.js';
import { decodedText, type Relayed, relay, upstreamHeaders, upstreamUrl } from './upstream.js';
import type { ApiAct } from './wire-act.js';

/**
 * The GitHub API proxy (REST and GraphQL), reached by `gh` over the gateway's Unix socket and by
 * other clients under `/gh/`. Reads pass through (REST paths of the session's repository only);
 * writes that are acts are judged against the work item's policy before anything is forwarded,
 * refused with a 403 the client prints, or forwarded with the real token and settled from the
 * upstream's answer. Each act is recorded exactly once. The capability token is never forwarded,
 * and no token is ever logged.
 */

export interface GitHubApiOptions {
  /** Request bodies past this are refused with 413 (the contents API carries whole files). */
  maxBodyBytes?: number;
  /** Silence from the upstream this long ends an exchange: 504 before its answer, a cut after. */
  idleTimeoutMs?: number;
  /** How long a lookup (a pull request's base branch, a node's repository) may take. */
  lookupTimeoutMs?: number;
}

const MAX_BODY = 25 * 1024 * 1024;
// GitHub answers most calls within seconds; a large GraphQL query can take tens of seconds.
const IDLE_MS = 2 * 60_000;
const LOOKUP_MS = 20_000;
/** An act's answer is read back up to this size; a bigger one leaves the act's outcome unknown. */
const KEEP_BYTES = 8 * 1024 * 1024;
const POLICY_DOCS = 'the-loop: docs/configuration.md (policy)';

type Plan = { refused: { status: number; message: string } } | { acts: ApiAct[]; graphql: boolean; url: URL };

function send(res: ServerResponse, status: number, message: string, close = false): void {
  if (res.destroyed) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // GitHub's error shape: gh prints `message`.
  const body = `${JSON.stringify({ message, documentation_url: POLICY_DOCS })}\n`;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(body);
}

/** The whole request body, bounded; 'too-large' past the bound, 'gone' when the client left. */
function readBody(req: IncomingMessage, max: number): Promise<Buffer | 'too-large' | 'gone'> {
  if (Number(req.headers['content-length'] ?? 0) > max) return Promise.resolve('too-large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        // Stop keeping it; the 413 closes the connection.
        req.removeAllListeners('data');
        req.resume();
        resolve('too-large');
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve('gone'));
    req.on('aborted', () => resolve('gone'));
  });
}

function plan(
  method: string,
  path: string,
  body: Buffer,
  encoded: boolean,
  ports: GatewayPorts,
  session: GatewaySession,
): Plan {
  const q = path.indexOf('?');
  const pathname = q === -1 ? path : path.slice(0, q);
  const search = q === -1 ? '' : path.slice(q);
  const read = method === 'GET' || method === 'HEAD';
  if (encoded && body.length > 0) {
    return { refused: { status: 415, message: 'compressed request bodies are not accepted' } };
  }
  const segments = pathSegments(pathname);
  if ('error' in segments) return { refused: { status: 400, message: segments.error } };
  const query = new URLSearchParams(search);
  // A method override (Rack's `_method`) would make the request another one than the one judged.
  if (query.has('_method')) return { refused: { status: 400, message: 'method overrides are not accepted' } };
  // `/graphql`, however spelled (`/GraphQL`, `/graphql/`, `/graphql.json`), is judged as GraphQL and
  // sent to the canonical GraphQL URL; anything below it is not an endpoint.
  if (routeWord(segments[0] ?? '') === 'graphql') {
    if (segments.length > 1) return { refused: { status: 404, message: 'not a GitHub API path' } };
    if (method !== 'POST') return { refused: { status: 405, message: 'GraphQL requests are POSTs' } };
    const found = classifyGraphqlBody(body.toString('utf8'));
    if ('refused' in found) return { refused: { status: 400, message: found.refused } };
    const base = graphqlUrl(ports.github.apiUrl);
    if (!base) return { refused: { status: 502, message: 'no GitHub GraphQL upstream' } };
    return { acts: found.acts, graphql: true, url: new URL(base.href + search) };
  }
  let parsed: unknown;
  if (body.length > 0) {
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      if (!read && routeWord(segments[0] ?? '') === 'repos') {
        return { refused: { status: 400, message: 'the request body is not JSON' } };
      }
    }
  }
  const found = classifyRest({ method, path: pathname, query, body: parsed }, session);
  if ('refused' in found) return found;
  if (found.foreign && found.acts.length === 0) {
    const message = `this session serves ${session.owner}/${session.repo} only, not ${found.repo}`;
    return { refused: { status: 403, message } };
  }
  const url = upstreamUrl(ports.github.apiUrl, path);
  if (!url) return { refused: { status: 400, message: 'not a path under the GitHub API' } };
  return { acts: found.acts, graphql: false, url };
}

function record(ports: GatewayPorts, session: GatewaySession, list: ReturnType<typeof wireAct>[]): void {
  for (const act of list) {
    try {
      ports.recordAct(session, act);
    } catch (error) {
      ports.logger.error('a GitHub API act could not be recorded', {
        session: session.id,
        kind: act.kind,
        error,
      });
    }
    const fields = { session: session.id, kind: act.kind, outcome: act.outcome, rule: act.rule };
    if (act.outcome === 'blocked') ports.logger.warn('GitHub API act refused', fields);
    else ports.logger.info('GitHub API act', { ...fields, upstream: act.detail.upstream });
  }
}

/** The outcome of each act from the relayed exchange. */
function settle(judged: Judged[], relayed: Relayed, graphql: boolean): Settled[] {
  if (relayed.kind !== 'response') {
    const upstream = relayed.kind === 'timeout' ? 'no answer in time' : 'connection failed';
    return judged.map(() => ({ outcome: 'unknown', upstream }));
  }
  if (!graphql) return judged.map(() => restOutcome(relayed.status));
  const text = relayed.body === undefined ? undefined : decodedText(relayed.body, relayed.encoding);
  return judged.map((j) => graphqlOutcome(j.act, relayed.status, text));
}

function answerFailure(res: ServerResponse, relayed: Relayed): void {
  if (relayed.kind === 'response' || relayed.sentHeaders) return;
  if (relayed.kind === 'timeout') send(res, 504, '[the-loop gateway] the GitHub API did not answer in time');
  else send(res, 502, '[the-loop gateway] the GitHub API could not be reached');
}

export function createGitHubApiHandler(options: GitHubApiOptions = {}): GatewayHandler {
  const maxBytes = options.maxBodyBytes ?? MAX_BODY;
  const idleMs = options.idleTimeoutMs ?? IDLE_MS;
  const lookupMs = options.lookupTimeoutMs ?? LOOKUP_MS;
  // Keep-alive to the upstream; idle pooled sockets are unref'd by Node and time out.
  const agents = {
    'http:': new http.Agent({ keepAlive: true, timeout: 60_000 }),
    'https:': new https.Agent({ keepAlive: true, timeout: 60_000 }),
  };

  return async function handleGitHubApi(req, res, ctx) {
    const { session, ports } = ctx;
    const method = (req.method ?? 'GET').toUpperCase();
    const body = await readBody(req, maxBytes);
    if (body === 'gone') return;
    if (body === 'too-large') {
      return send(res, 413, `[the-loop gateway] request body over ${maxBytes} bytes`, true);
    }
    const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
    const p = plan(method, ctx.path, body, encoding !== 'identity', ports, session);
    if ('refused' in p) {
      ports.logger.warn('GitHub API request refused', {
        session: session.id,
        method,
        status: p.refused.status,
      });
      return send(res, p.refused.status, `[the-loop gateway] ${p.refused.message}`);
    }
    const exchange = {
      url: p.url,
      method,
      body,
      res,
      idleMs,
      agent: agents[p.url.protocol as 'http:' | 'https:'],
    };
    const headers = (identity: boolean) =>
      upstreamHeaders(req.headers, ctx.token, ports.github.token, { identity, length: body.length });
    if (p.acts.length === 0) {
      answerFailure(res, await relay({ ...exchange, headers: headers(false), keep: 0 }));
      return;
    }
    const policy = ports.policyFor(session.workItem);
    const judged = await judgeActs(p.acts, policy, { github: ports.github, session, timeoutMs: lookupMs });
    const denied = judged.filter((j) => j.verdict.verdict === 'deny');
    if (denied.length > 0) {
      const others = 'not done: refused with another act of the same request';
      record(
        ports,
        session,
        judged.map((j) =>
          wireAct(j, 'blocked', undefined, j.verdict.verdict === 'deny' ? undefined : others),
        ),
      );
      const reasons = [...new Set(denied.map((j) => j.verdict.reason ?? j.verdict.rule))];
      return send(res, 403, `[the-loop policy] ${reasons.join('; ')}`);
    }
    const relayed = await relay({ ...exchange, headers: headers(true), keep: KEEP_BYTES });
    answerFailure(res, relayed);
    const outcomes = settle(judged, relayed, p.graphql);
    record(
      ports,
      session,
      judged.map((j, i) => wireAct(j, outcomes[i]?.outcome ?? 'unknown', outcomes[i]?.upstream)),
    );
  };
}

/** The handler with the default options, as the gateway mounts it. */
export const handleGitHubApi: GatewayHandler = createGitHubApiHandler();
