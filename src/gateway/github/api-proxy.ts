import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { busyHeaders, readBodyWithin } from '../../web/read-body.js';
import { githubToken, githubTokenRefused } from '../github-token.js';
import type { GatewayHandler, GatewayPorts, GatewaySession, WireAct } from '../types.js';
import { upstreamAgents } from '../upstream-agents.js';
import {
  graphqlOutcome,
  type Judged,
  judgeActs,
  refusedAct,
  restOutcome,
  type Settled,
  targetRefusal,
  wireAct,
} from './judge.js';
import type { LookupContext } from './lookup.js';
import { type Plan, plan } from './plan.js';
import { decodedText, type Relayed, type RelayRequest, relay, upstreamHeaders } from './upstream.js';

/**
 * The GitHub API proxy (REST and GraphQL), reached by `gh` over the gateway's Unix socket and by
 * other clients under `/gh/`. Default deny (`plan.ts`): reads of the session's repository and
 * writes on the allow-lists pass; writes that are acts are judged against the work item's policy
 * before anything is forwarded, refused with a 403 the client prints, or forwarded with the real
 * token and settled from the upstream's answer; the nodes allowed GraphQL mutations write to are
 * looked up and must be the session's repository's; every other write is refused and recorded.
 * Each act is recorded exactly once. The capability token is never forwarded, and no token is
 * ever logged.
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

/** The handler, and what to do when the gateway closes. */
export interface GitHubApiHandler extends GatewayHandler {
  /** Drop the pooled keep-alive connections to the upstream. */
  close(): void;
}

type Forward = Exclude<Plan, { refused: unknown }>;

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

/**
 * The whole request body, bounded and counted against the gateway's body budget (web/limits.ts):
 * 'too-large' past the bound, 'busy' when the budget has no room, 'gone' when the client left.
 */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer | 'too-large' | 'busy' | 'gone'> {
  const read = await readBodyWithin(req, max);
  if (read.ok) return read.body;
  return read.why === 'timeout' ? 'gone' : read.why;
}

async function record(ports: GatewayPorts, session: GatewaySession, list: readonly WireAct[]): Promise<void> {
  for (const act of list) {
    try {
      await ports.recordAct(session, act);
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

/** GitHub answered 401 to the gateway's credential: the ports drop it, and the next request gets a fresh one. */
function noteRefusal(
  ports: GatewayPorts,
  session: GatewaySession,
  token: string | undefined,
  relayed: Relayed,
): void {
  if (token !== undefined && relayed.kind === 'response' && relayed.status === 401)
    githubTokenRefused(ports, session);
}

function answerFailure(res: ServerResponse, relayed: Relayed): void {
  if (relayed.kind === 'response' || relayed.sentHeaders) return;
  if (relayed.kind === 'timeout') send(res, 504, '[the-loop gateway] the GitHub API did not answer in time');
  else send(res, 502, '[the-loop gateway] the GitHub API could not be reached');
}

export function createGitHubApiHandler(options: GitHubApiOptions = {}): GitHubApiHandler {
  const maxBytes = options.maxBodyBytes ?? MAX_BODY;
  const idleMs = options.idleTimeoutMs ?? IDLE_MS;
  const lookupMs = options.lookupTimeoutMs ?? LOOKUP_MS;
  // Keep-alive to the upstream, pooled per protocol (made on first use: see upstream-agents.ts);
  // `close` drops them with the gateway.
  const agents = upstreamAgents();

  const handle: GatewayHandler = async function handleGitHubApi(req, res, ctx) {
    const { session, ports } = ctx;
    const method = (req.method ?? 'GET').toUpperCase();
    const body = await readBody(req, maxBytes);
    if (body === 'gone') return;
    if (body === 'too-large') {
      return send(res, 413, `[the-loop gateway] request body over ${maxBytes} bytes`, true);
    }
    if (body === 'busy') {
      res.setHeader('retry-after', busyHeaders(req)['retry-after'] ?? '5');
      return send(res, 503, '[the-loop gateway] too many request bodies in flight; try again', true);
    }
    const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
    const p = plan(
      { method, path: ctx.path, body, encoded: encoding !== 'identity', apiUrl: ports.github.apiUrl },
      session,
    );
    if ('refused' in p) {
      await record(ports, session, p.refused.acts ?? []);
      ports.logger.warn('GitHub API request refused', {
        session: session.id,
        method,
        status: p.refused.status,
      });
      return send(res, p.refused.status, `[the-loop gateway] ${p.refused.message}`);
    }
    const agentFor = (url: URL) => agents.get(url.protocol);
    // The App's installation token for this repository, or the configured token.
    const token = await githubToken(ports, session);
    const lookups = { github: ports.github, token, session, timeoutMs: lookupMs, agentFor };
    if (p.targets.length > 0) {
      // Allowed mutations name the node they write to; it must be the session's repository's.
      const bad = await targetRefusal(p.targets, lookups);
      if (bad) {
        const { mutation } = bad.target;
        const detail = { via: 'GraphQL', httpMethod: 'POST', endpoint: 'graphql', mutation };
        await record(ports, session, [refusedAct(`POST /graphql ${mutation}`, detail, bad.rule, bad.reason)]);
        return send(res, 403, `[the-loop gateway] ${bad.reason}`);
      }
    }
    const exchange: Exchange = {
      url: p.url,
      method,
      body,
      res,
      idleMs,
      agent: agentFor(p.url),
      headers: (identity) =>
        upstreamHeaders(req.headers, ctx.token, token, { identity, length: body.length }),
    };
    if (p.acts.length === 0) {
      const relayed = await relay({ ...exchange, headers: exchange.headers(false), keep: 0 });
      noteRefusal(ports, session, token, relayed);
      answerFailure(res, relayed);
      return;
    }
    await judgeAndRelay(p, exchange, { ports, session, lookups });
  };
  return Object.assign(handle, {
    close: () => agents.destroy(),
  });
}

type Exchange = Omit<RelayRequest, 'headers' | 'keep'> & { headers(identity: boolean): OutgoingHttpHeaders };

/** The acts of a request judged by the policy; forwarded when none is denied, then settled and recorded. */
async function judgeAndRelay(
  p: Forward,
  exchange: Exchange,
  x: { ports: GatewayPorts; session: GatewaySession; lookups: LookupContext },
): Promise<void> {
  const { ports, session } = x;
  const policy = ports.policyFor(session.workItem);
  const judged = await judgeActs(p.acts, policy, x.lookups);
  const denied = judged.filter((j) => j.verdict.verdict === 'deny');
  if (denied.length > 0) {
    const others = 'not done: refused with another act of the same request';
    await record(
      ports,
      session,
      judged.map((j) => wireAct(j, 'blocked', undefined, j.verdict.verdict === 'deny' ? undefined : others)),
    );
    const reasons = [...new Set(denied.map((j) => j.verdict.reason ?? j.verdict.rule))];
    return send(exchange.res, 403, `[the-loop policy] ${reasons.join('; ')}`);
  }
  const relayed = await relay({ ...exchange, headers: exchange.headers(true), keep: KEEP_BYTES });
  noteRefusal(ports, session, x.lookups.token, relayed);
  answerFailure(exchange.res, relayed);
  const outcomes = settle(judged, relayed, p.graphql);
  await record(
    ports,
    session,
    judged.map((j, i) => wireAct(j, outcomes[i]?.outcome ?? 'unknown', outcomes[i]?.upstream)),
  );
}

/** The handler with the default options, as the gateway mounts it. */
export const handleGitHubApi: GitHubApiHandler = createGitHubApiHandler();
