import type { IncomingMessage, ServerResponse } from 'node:http';
import { LoopError } from '../core/errors.js';
import { GROUP_BY, type GroupBy } from '../core/ports/ledger.js';
import { parseWhen } from '../ledger/report.js';
import type { Logger } from '../log/logger.js';
import { busyHeaders, readBodyWithin } from '../web/read-body.js';
import {
  type Access,
  changeRefusal,
  type Principal,
  principalOf,
  readRefusal,
  ticketHeader,
} from './access.js';
import { sendError, sendJson } from './http.js';
import { type ConsoleDeps, SESSION_ID, type TerminalPort } from './ports.js';

/**
 * /api: JSON for the pages and for Bearer clients. A browser login's requests, reads included (the
 * data is what needs protecting), need the page's ticket; its changes (POST) the exact Origin too
 * (access.ts). Bodies are JSON objects of at most 16 KiB.
 */

export const MAX_API_BODY = 16 * 1024;

export interface ApiContext {
  access: Access;
  deps: ConsoleDeps;
  terminals: TerminalPort | undefined;
  logger: Logger;
}

const REFUSAL_HINT =
  "The console's pages send a ticket made with the login's key, which the login page left in this " +
  'browser: reload the page, or log in again with `the-loop console`. API clients: send the token ' +
  '(Authorization: Bearer).';

const SESSION_ACTION = /^\/api\/sessions\/([^/]+)\/(resume|takeover|handback)$/;
const SESSION_ONE = /^\/api\/sessions\/([^/]+)$/;

/** Answer an /api request. */
export async function handleApi(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, url: URL) {
  const principal = principalOf(ctx.access, req);
  if (!principal) {
    return sendError(res, 401, 'not logged in', 'Run `the-loop console` and open the link it prints.');
  }
  try {
    const read = req.method === 'GET' || req.method === 'HEAD';
    if (!read && req.method !== 'POST') return sendError(res, 405, `${req.method} is not allowed here`);
    const ticket = ticketHeader(req);
    const refusal = read
      ? readRefusal(ctx.access, principal, ticket)
      : changeRefusal(ctx.access, req, principal, ticket);
    if (refusal) {
      ctx.logger.warn('console: request refused', { path: url.pathname, why: refusal });
      return sendError(res, 403, refusal, REFUSAL_HINT);
    }
    if (read) return await answerRead(ctx, res, url);
    return await answerChange(ctx, req, res, url, principal);
  } catch (error) {
    answerFailure(ctx, res, url, error);
  }
}

async function answerRead(ctx: ApiContext, res: ServerResponse, url: URL): Promise<void> {
  const path = url.pathname;
  if (path === '/api/sessions') return sendJson(res, 200, await ctx.deps.sessionRows());
  if (path === '/api/usage') return sendJson(res, 200, await ctx.deps.usage(usageQuery(url.searchParams)));
  if (path === '/api/acts') {
    const workItem = url.searchParams.get('workItem') ?? undefined;
    if (workItem !== undefined && workItem.length > 300) throw new LoopError('usage', 'workItem is too long');
    const breaches = url.searchParams.get('breaches') === '1';
    return sendJson(res, 200, await ctx.deps.acts({ breaches, workItem }));
  }
  const one = SESSION_ONE.exec(path);
  if (one?.[1] !== undefined) {
    const id = sessionId(one[1]);
    const detail = await ctx.deps.sessionDetail(id);
    return detail ? sendJson(res, 200, detail) : sendError(res, 404, `no session ${id}`);
  }
  return sendError(res, 404, 'not found');
}

/** `?by=&since=&until=`, as `the-loop usage` takes them (default: the last 7 days by day). */
function usageQuery(params: URLSearchParams): { since: Date; until: Date; by: GroupBy } {
  const now = new Date();
  const by = params.get('by') ?? 'day';
  if (!(GROUP_BY as readonly string[]).includes(by)) {
    throw new LoopError('usage', `by must be one of ${GROUP_BY.join(', ')}`);
  }
  const since = parseWhen(params.get('since') ?? '7d', now, 'since');
  const until = params.has('until') ? parseWhen(params.get('until') ?? '', now, 'until') : now;
  if (since >= until) throw new LoopError('usage', 'since must be before until');
  return { since, until, by: by as GroupBy };
}

async function answerChange(
  ctx: ApiContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  principal: Principal,
): Promise<void> {
  const match = SESSION_ACTION.exec(url.pathname);
  if (!match?.[1] || !match[2]) return sendError(res, 404, 'not found');
  const body = await readJsonBody(req, res);
  if (!body) return;
  const id = sessionId(match[1]);
  const who =
    principal.kind === 'login'
      ? { by: principal.login.who, principal: principal.login.publicId }
      : { by: 'an API client (bearer token)', principal: null };
  if (match[2] === 'resume') {
    const raise = body.raise;
    if (raise !== undefined && (typeof raise !== 'string' || raise.length > 40)) {
      return sendError(res, 400, 'raise must be a string (a number of turns, tokens or dollars)');
    }
    const outcome = await ctx.deps.resume(id, raise);
    ctx.deps.notifyDispatcher();
    ctx.logger.info('console: session resumed', { session: id, by: who.by });
    return sendJson(res, 200, outcome);
  }
  if (match[2] === 'takeover') {
    const takeover = await ctx.deps.takeOver(id, who);
    ctx.terminals?.setTakeover(id, takeover);
    ctx.logger.info('console: session taken over', { session: id, by: who.by });
    return sendJson(res, 200, { takeover });
  }
  await ctx.deps.handBack(id);
  ctx.terminals?.setTakeover(id, null);
  ctx.deps.notifyDispatcher();
  ctx.logger.info('console: session handed back', { session: id, by: who.by });
  return sendJson(res, 200, { takeover: null });
}

function sessionId(text: string): string {
  let id: string;
  try {
    id = decodeURIComponent(text);
  } catch {
    id = '';
  }
  if (!SESSION_ID.test(id)) throw new LoopError('session-missing', 'not a session id');
  return id.toLowerCase();
}

/** The body as a JSON object ({} when empty); answers 400/413/503 itself and returns undefined. */
async function readJsonBody(
  req: IncomingMessage,
  res: ServerResponse,
): Promise<Record<string, unknown> | undefined> {
  const hasBody = req.headers['content-length'] !== '0' && req.headers['content-length'] !== undefined;
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (!hasBody && !chunked) return {};
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    sendError(res, 415, 'the body must be application/json');
    req.resume();
    return undefined;
  }
  const read = await readBodyWithin(req, MAX_API_BODY, { idleMs: 10_000 });
  if (!read.ok) {
    if (read.why === 'too-large') sendError(res, 413, `the body is larger than ${MAX_API_BODY} bytes`);
    else if (read.why === 'busy') res.writeHead(503, busyHeaders(req)).end();
    else res.destroy();
    return undefined;
  }
  if (read.body.length === 0) return {};
  let value: unknown;
  try {
    value = JSON.parse(read.body.toString('utf8'));
  } catch {
    sendError(res, 400, 'the body is not valid JSON');
    return undefined;
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    sendError(res, 400, 'the body must be a JSON object');
    return undefined;
  }
  return value as Record<string, unknown>;
}

const STATUS_OF: Partial<Record<string, number>> = {
  usage: 400,
  'work-item-invalid': 400,
  'session-missing': 404,
  'session-busy': 409,
  'session-closed': 409,
};

/** A LoopError is the caller's to read (message and hint); anything else is logged, not shown. */
function answerFailure(ctx: ApiContext, res: ServerResponse, url: URL, error: unknown) {
  if (error instanceof LoopError && STATUS_OF[error.code] !== undefined) {
    return sendError(res, STATUS_OF[error.code] as number, error.message, error.hint);
  }
  ctx.logger.error('console: request failed', { path: url.pathname, error });
  sendError(res, 500, 'internal error', 'See the daemon log.');
}
