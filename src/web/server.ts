import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { reply } from '../github/ingress.js';
import type { Logger } from '../log/logger.js';

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
