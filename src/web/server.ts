import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log/logger.js';

export function reply(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return;
  const body = `${text}\n`;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

/** Read the body up to `limit` bytes; null when it is larger (the request is then drained, not kept). */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer | null | 'aborted'> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        parts.length = 0;
        resolve(null);
        return;
      }
      parts.push(chunk);
    });
    req.on('end', () => {
      if (!over) resolve(Buffer.concat(parts, size));
    });
    req.on('aborted', () => resolve('aborted'));
    req.on('error', () => resolve('aborted'));
  });
}

export type Handler = (
  req: import('node:http').IncomingMessage,
  res: import('node:http').ServerResponse,
) => Promise<void> | void;

export interface HttpServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The daemon's HTTP server: a fixed routing table, nothing served by default. */
export async function startHttpServer(options: {
  host: string;
  port: number;
  routes: Record<string, Handler>;
  logger: Logger;
}): Promise<HttpServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const handler = Object.hasOwn(options.routes, path) ? options.routes[path] : undefined;
    if (!handler) return reply(res, 404, 'not found');
    Promise.resolve(handler(req, res)).catch((error: unknown) => {
      options.logger.error('request handler failed', { path, error });
      reply(res, 500, 'internal error');
    });
  });
  // Slow-loris guard: a request must arrive whole within this time.
  server.requestTimeout = 60_000;
  server.headersTimeout = 20_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
