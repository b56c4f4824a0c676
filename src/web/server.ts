import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LoopError } from '../core/errors.js';
import type { Logger } from '../log/logger.js';
import { type ListenerCounts, ListenerGuard, type ListenerLimits } from './limits.js';

export function reply(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return;
  const body = `${text}\n`;
  // Object.assign, not a spread: every answer goes through here, and object spread is a slow path
  // in V8 (~1.5 µs a spread on Node 20 here, bench:ingest).
  res.writeHead(
    status,
    Object.assign(
      { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) },
      headers,
    ),
  );
  res.end(body);
}

export type Handler = (
  req: import('node:http').IncomingMessage,
  res: import('node:http').ServerResponse,
) => Promise<void> | void;

export interface HttpServer {
  url: string;
  port: number;
  /** What its listener limits hold and have shed so far. */
  stats(): ListenerCounts;
  close(): Promise<void>;
}

/** Why a server could not listen on `host:port`, and what to change. */
export function listenError(at: { host: string; port: number }, error: unknown): LoopError {
  const code = (error as NodeJS.ErrnoException).code;
  return new LoopError('config-invalid', `cannot listen on ${at.host}:${at.port}: ${code ?? String(error)}`, {
    cause: error,
    hint:
      code === 'EADDRINUSE'
        ? 'Another process uses that port: set server.port.'
        : 'Check server.host and server.port.',
  });
}

/**
 * The daemon's HTTP server: a fixed routing table, nothing served by default, under the listener
 * limits (limits.ts; defaults unless given).
 */
export async function startHttpServer(options: {
  host: string;
  port: number;
  routes: Record<string, Handler>;
  logger: Logger;
  limits?: Partial<ListenerLimits>;
}): Promise<HttpServer> {
  const guard = new ListenerGuard(options.limits, options.logger, 'the HTTP listener (webhook, telemetry)');
  const server: Server = guard.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const handler = Object.hasOwn(options.routes, path) ? options.routes[path] : undefined;
    if (!handler) return reply(res, 404, 'not found');
    Promise.resolve(handler(req, res)).catch((error: unknown) => {
      options.logger.error('request handler failed', { path, error });
      reply(res, 500, 'internal error');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    stats: () => guard.stats(),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
