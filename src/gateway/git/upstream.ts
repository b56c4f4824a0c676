import {
  type ClientRequest,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { GitReply } from './receive-pack.js';

/**
 * The I/O edge of the git proxy: the upstream request, the headers that cross, and the answers we
 * write ourselves. The client's `Authorization` (our capability token) never crosses; the real
 * credential is added here and nowhere else.
 */

export const PREFIX = '[the-loop gateway]';

/** Request headers git sends that the upstream needs (Documentation/gitprotocol-http.txt, remote-curl.c). */
const REQUEST_HEADERS = ['content-type', 'accept', 'accept-language', 'git-protocol', 'user-agent'] as const;
/** Response headers passed back: the content's own, and the no-cache ones http-backend and GitHub set. */
const RESPONSE_HEADERS = [
  'content-type',
  'content-encoding',
  'content-length',
  'cache-control',
  'expires',
  'pragma',
  'vary',
] as const;

/**
 * The headers of the upstream request. The body crosses byte for byte, so its `Content-Length` (or,
 * without one, chunked framing, which node chooses itself) and `Content-Encoding` stay valid. A
 * receive-pack request never asks for a compressed answer: the gateway reads its report.
 */
export function upstreamHeaders(
  req: IncomingMessage,
  token: string | undefined,
  readsAnswer: boolean,
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name of REQUEST_HEADERS) {
    const value = req.headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  const length = req.headers['content-length'];
  if (req.method === 'POST' && typeof length === 'string') out['content-length'] = length;
  const encoding = req.headers['content-encoding'];
  if (req.method === 'POST' && typeof encoding === 'string') out['content-encoding'] = encoding;
  const accept = req.headers['accept-encoding'];
  if (!readsAnswer && typeof accept === 'string') out['accept-encoding'] = accept;
  // GitHub's form for an installation or personal token over git smart HTTP.
  if (token) out.authorization = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
  return out;
}

export function clientHeaders(ures: IncomingMessage): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name of RESPONSE_HEADERS) {
    const value = ures.headers[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** An upstream that stays silent (no byte either way) this long is given up. */
export class UpstreamIdleError extends Error {
  readonly code = 'UPSTREAM_IDLE';
}

/** Open the upstream request; the caller writes (or pipes) its body and listens for its events. */
export function openUpstream(
  url: string,
  method: string,
  headers: OutgoingHttpHeaders,
  idleTimeoutMs: number,
): ClientRequest {
  const send = url.startsWith('https:') ? httpsRequest : httpRequest;
  const up = send(url, { method, headers });
  up.setTimeout(idleTimeoutMs, () => {
    up.destroy(new UpstreamIdleError(`the upstream sent nothing for ${Math.round(idleTimeoutMs / 1000)} s`));
  });
  return up;
}

/** Nothing reached the upstream: a connection refused, a host not found. The push certainly did not land. */
export function neverConnected(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH';
}

/** What the client is told when the upstream fails before answering. */
export function upstreamFailure(error: unknown): { status: 502 | 504; message: string } {
  if (error instanceof UpstreamIdleError) {
    return { status: 504, message: `${PREFIX} git upstream timed out: ${error.message}` };
  }
  const code = (error as NodeJS.ErrnoException).code ?? 'error';
  const what = neverConnected(error) ? 'unreachable' : 'failed';
  return { status: 502, message: `${PREFIX} git upstream ${what} (${code})` };
}

/** A plain-text answer (git shows a text/plain body of a failed request as `remote: …` lines). */
export function sendText(res: ServerResponse, status: number, message: string, allow?: string): void {
  if (res.destroyed || res.writableEnded) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = `${message}\n`;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-cache',
    ...(allow && { allow }),
  });
  res.end(body);
}

export function sendReply(res: ServerResponse, reply: GitReply): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(reply.status, {
    'content-type': reply.contentType,
    'content-length': reply.body.length,
    'cache-control': 'no-cache',
  });
  res.end(reply.body);
}

/** Read the rest of a request body and throw it away; resolves when it ended or the client left. */
export function drain(req: IncomingMessage): Promise<void> {
  if (req.complete || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    req.once('end', resolve);
    req.once('close', resolve);
    req.on('error', () => resolve());
    req.resume();
  });
}
