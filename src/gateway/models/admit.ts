import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { GatewayPorts, GatewaySession, ModelApi } from '../types.js';
import { allowedRequest, type BodyCheck, notAllowedMessage, refusedBody, shownPath } from './allow-list.js';
import { readBody } from './request-body.js';
import { pathUnderBase, upstreamRequestHeaders, upstreamUrl } from './rewrite.js';
import { guessApi, type RefusalKind, vendorError } from './vendor-errors.js';

/**
 * What the model proxy checks before it forwards anything, and its refusals: a route, a path under
 * the route's base, the allow-list (allow-list.ts), the budget, the size; a Responses request's
 * body too, read whole for that alone.
 */

export interface AdmitCtx {
  session: GatewaySession;
  ports: GatewayPorts;
  /** What the engine appended to `/m/<token>` (with its query). */
  path: string;
  token: string;
}

/** Answer in the vendor's error shape (or cut the response, when its headers are already out). */
export function send(
  res: ServerResponse,
  api: ModelApi,
  kind: RefusalKind,
  message: string,
  close = false,
): undefined {
  if (res.headersSent) {
    res.destroy();
    return undefined;
  }
  const e = vendorError(api, kind, message);
  // An oversized upload may still be arriving: close the connection rather than read it all.
  res.writeHead(e.status, close ? { ...e.headers, connection: 'close' } : e.headers);
  res.end(e.body);
  return undefined;
}

/** Requests that can cost tokens: everything but reads (model lists, probes). */
const costsTokens = (method: string | undefined) => !['GET', 'HEAD', 'OPTIONS'].includes(method ?? 'GET');

/** What a request that may be forwarded is forwarded as. */
interface Admitted {
  api: ModelApi;
  url: URL;
  headers: OutgoingHttpHeaders;
  /** The body check the allow-list asks for, if any. */
  check: BodyCheck | undefined;
  /** The path under the base, as shown and logged. */
  path: string;
}

const declaredLength = (req: IncomingMessage) => Number(req.headers['content-length'] ?? 0);

/**
 * The checks before anything is forwarded, cheapest and most certain first: a route, a path under
 * its base, the allow-list, the budget, the declared size. Undefined when refused (answered here).
 */
export async function admit(req: IncomingMessage, res: ServerResponse, ctx: AdmitCtx, maxBytes: number) {
  const { session, ports } = ctx;
  const route = ports.modelRoute(session);
  const api = route?.api ?? guessApi(ctx.path, req.headers);
  if (!route)
    return send(res, api, 'not-found', "[the-loop gateway] this session's engine has no model route");
  const credential = route.credential?.value;
  const url = upstreamUrl(route.upstream, ctx.path, ctx.token, credential);
  if (!url) return send(res, api, 'not-found', '[the-loop gateway] not a path under the model API');
  const under = pathUnderBase(route.upstream, url);
  const path = shownPath(under, ctx.token);
  const verdict = allowedRequest(api, req.method, under);
  if (!verdict.allowed) {
    // A large body is not read just to be dropped: the connection closes after the refusal.
    return refuse(req, res, ctx, api, path, undefined, declaredLength(req) > maxBytes);
  }
  if (costsTokens(req.method)) {
    const reason = await ports.overBudget(session);
    if (reason !== undefined) {
      ports.logger.warn('model request refused at the gateway: over budget', {
        session: session.id,
        workItem: session.workItem,
        api,
        reason,
      });
      // The unread request body is drained by Node after the answer, keeping the connection: the
      // engine reads our refusal rather than a reset.
      return send(res, api, 'budget', `[the-loop budget] ${reason}`);
    }
  }
  if (declaredLength(req) > maxBytes) {
    return send(res, api, 'too-large', `[the-loop gateway] request body over ${maxBytes} bytes`, true);
  }
  const headers = upstreamRequestHeaders(req.headers, ctx.token, credential);
  const admitted: Admitted = { api, url, headers, check: verdict.check, path };
  return admitted;
}

/** A request the allow-list (or its body check) refuses: logged, answered in the vendor's shape. */
function refuse(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: Pick<AdmitCtx, 'session' | 'ports'>,
  api: ModelApi,
  path: string,
  why: string | undefined,
  close = false,
): undefined {
  const { method } = req;
  ctx.ports.logger.warn('model request refused at the gateway: not allowed', {
    session: ctx.session.id,
    workItem: ctx.session.workItem,
    api,
    method,
    // The path only: a query may hold a key.
    path,
    ...(why ? { reason: why } : {}),
  });
  send(res, api, 'not-allowed', notAllowedMessage(method, path, why), close);
  return undefined;
}

/**
 * Read the body the allow-list asks to check, and check it: the body, to forward whole; undefined
 * when refused or failed (answered here).
 */
export async function readChecked(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: Pick<AdmitCtx, 'session' | 'ports'> & { api: ModelApi; path: string },
  check: BodyCheck,
  maxBytes: number,
  idleMs: number,
): Promise<Buffer | undefined> {
  const { api, path } = ctx;
  const read = await readBody(req, maxBytes, idleMs);
  if (!read.ok) {
    const fields = { session: ctx.session.id, api, method: req.method, path, outcome: read.why };
    ctx.ports.logger.warn('model request ended early', fields);
    if (read.why === 'too-large')
      return send(res, api, 'too-large', `[the-loop gateway] request body over ${maxBytes} bytes`, true);
    if (read.why === 'timeout')
      return send(res, api, 'timeout', '[the-loop gateway] the request body did not arrive in time', true);
    if (read.why === 'busy')
      return send(res, api, 'busy', '[the-loop gateway] too many request bodies in flight; retry', true);
    res.destroy();
    return undefined;
  }
  const why = refusedBody(check, read.body, req.headers['content-encoding']);
  if (why !== undefined) return refuse(req, res, ctx, api, path, why);
  return read.body;
}
