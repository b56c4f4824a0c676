import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { LoopError } from '../../core/errors.js';
import type { Logger } from '../../log/logger.js';
import { type ListenerCounts, ListenerGuard, type ListenerLimits } from '../../web/limits.js';
import { busyHeaders, readBodyWithin } from '../../web/read-body.js';
import {
  type Access,
  accessFor,
  admitRequest,
  isLoopbackHost,
  MAX_BODY_BYTES,
  MAX_SESSIONS,
  MCP_PATH,
  type RequestHead,
  urlHost,
  type Verdict,
} from './http-rules.js';
import type { SessionTable } from './sessions.js';

/**
 * The loopback listener of `the-loop mcp --http`: every request is judged by its head first
 * (http-rules.ts: Host, Origin, bearer token, path, method, content type, length), its body read
 * within 1 MiB and the listener's budget, then handed to its session's transport — or, for an
 * initialize request, to a new session. Runs under the listener limits every listener here has
 * (web/limits.ts).
 */

/**
 * A client holds a GET stream and a POST or two per session; 128 connections cover the 16 sessions
 * with room to spare. Request bodies are small (1 MiB each at most, all sessions at once fit) and
 * arrive at once; a response may stream for as long as a command runs (requestTimeout bounds only
 * receiving the request).
 */
export const MCP_LIMITS: Partial<ListenerLimits> = {
  maxConnections: 128,
  maxBufferedBytes: MAX_SESSIONS * MAX_BODY_BYTES,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
};

/** A body whose next byte is this late is dropped (its client stalled). */
const BODY_IDLE_MS = 10_000;

export interface McpListenerOptions {
  host: string;
  port: number;
  token: string;
  sessions: SessionTable;
  logger: Logger;
  limits?: Partial<ListenerLimits> | undefined;
}

export interface McpListener {
  /** The endpoint: `http://127.0.0.1:<port>/mcp`. */
  url: string;
  port: number;
  /** Resolves when the listener has closed (by `close` or otherwise). */
  closed: Promise<void>;
  stats(): ListenerCounts;
  /** Stop listening and cut every connection (streams included). Idempotent. */
  close(): Promise<void>;
}

const one = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value.join(', ') : value;

function headOf(req: IncomingMessage): RequestHead {
  const length = one(req.headers['content-length']);
  const n = length === undefined ? Number.NaN : Number(length);
  return {
    method: req.method ?? '',
    url: req.url ?? '',
    host: one(req.headers.host),
    origin: one(req.headers.origin),
    authorization: one(req.headers.authorization),
    contentType: one(req.headers['content-type']),
    contentLength: Number.isSafeInteger(n) ? n : undefined,
  };
}

/** A JSON-RPC error as the SDK's transport writes its own, so clients read both alike. */
function answer(
  res: ServerResponse,
  status: number,
  message: string,
  options: { headers?: Record<string, string> | undefined; code?: number; close?: boolean } = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code: options.code ?? -32000, message }, id: null });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    ...(options.close ? { connection: 'close' } : {}),
    ...options.headers,
  });
  res.end(body);
}

/** The body of a POST as JSON, or the answer already written (undefined). */
async function readJson(req: IncomingMessage, res: ServerResponse): Promise<{ body: unknown } | undefined> {
  const read = await readBodyWithin(req, MAX_BODY_BYTES, { idleMs: BODY_IDLE_MS });
  if (!read.ok) {
    if (read.why === 'too-large')
      answer(res, 413, `Payload Too Large: at most ${MAX_BODY_BYTES} bytes`, { close: true });
    else if (read.why === 'busy')
      answer(res, 503, 'Service Unavailable: try again', { headers: busyHeaders(req), close: true });
    else if (read.why === 'timeout') answer(res, 408, 'Request Timeout', { close: true });
    else res.destroy();
    return undefined;
  }
  try {
    return { body: JSON.parse(read.body.toString('utf8')) };
  } catch {
    // A syntax error, or a nesting too deep for the parser: either way not a message.
    answer(res, 400, 'Parse error: Invalid JSON', { code: -32700 });
    return undefined;
  }
}

async function handle(
  ctx: { access: Access | null; sessions: SessionTable },
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const verdict: Verdict = ctx.access
    ? admitRequest(headOf(req), ctx.access)
    : { ok: false, status: 503, message: 'Service Unavailable: starting' };
  if (!verdict.ok) {
    // A refused POST's body is never read: the connection ends with the answer.
    answer(res, verdict.status, verdict.message, { headers: verdict.headers, close: req.method === 'POST' });
    return;
  }
  let body: unknown;
  if (req.method === 'POST') {
    const read = await readJson(req, res);
    if (!read) return;
    body = read.body;
  }
  const id = one(req.headers['mcp-session-id']);
  if (id !== undefined) {
    if (!(await ctx.sessions.serve(id, req, res, body)))
      answer(res, 404, 'Session not found: initialize a new session', { code: -32001 });
    return;
  }
  if (req.method === 'POST' && !Array.isArray(body) && isInitializeRequest(body)) {
    const refusal = await ctx.sessions.start(req, res, body);
    if (refusal)
      answer(res, refusal.status, refusal.message, {
        headers: refusal.retryAfterSeconds ? { 'retry-after': String(refusal.retryAfterSeconds) } : undefined,
      });
    return;
  }
  answer(res, 400, 'Bad Request: Mcp-Session-Id header is required (send initialize first)');
}

export async function startMcpListener(options: McpListenerOptions): Promise<McpListener> {
  const { logger } = options;
  if (!isLoopbackHost(options.host))
    throw new LoopError(
      'usage',
      `--host must be a loopback address (127.0.0.1, ::1, localhost), not ${options.host}`,
    );
  const guard = new ListenerGuard({ ...MCP_LIMITS, ...options.limits }, logger, 'the connector listener');
  // No request is admitted until the port, and so the Host values allowed, are known.
  const ctx: { access: Access | null; sessions: SessionTable } = { access: null, sessions: options.sessions };
  const server: Server = guard.createServer((req, res) => {
    handle(ctx, req, res).catch((error: unknown) => {
      logger.error('connector listener: request failed', { error });
      answer(res, 500, 'Internal error (logged)');
    });
  });
  const closed = new Promise<void>((resolve) => server.once('close', () => resolve()));
  const port = await listen(server, options.host, options.port);
  ctx.access = accessFor({ host: options.host, port }, options.token);
  let closing: Promise<void> | null = null;
  return {
    url: `http://${urlHost(options.host)}:${port}${MCP_PATH}`,
    port,
    closed,
    stats: () => guard.stats(),
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

async function listen(server: Server, host: string, port: number): Promise<number> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new LoopError('usage', `the connector cannot listen on ${host}:${port}: ${code ?? String(error)}`, {
      cause: error,
      ...(code === 'EADDRINUSE'
        ? { hint: 'another process uses that port: pick another, or --port 0 for any free one' }
        : {}),
    });
  }
  return (server.address() as AddressInfo).port;
}
