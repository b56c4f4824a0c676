/**
 * The chaos test's network: a round-robin HTTP proxy (the load balancer all webhooks go through) and
 * a TCP proxy between one daemon and PostgreSQL that the test can cut and restore.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';

const listen = (server: Server | NetServer, port = 0): Promise<number> =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : 0);
    });
  });

const closeServer = (server: Server | NetServer): Promise<void> =>
  new Promise((resolve) => server.close(() => resolve()));

export interface RoundRobin {
  /** The proxy's base URL (http://127.0.0.1:<port>); a request's path is forwarded as it is. */
  url: string;
  /** How many requests each backend was handed (connection failures included). */
  handed: number[];
  close(): Promise<void>;
}

/**
 * A tiny load balancer: each request goes to the next backend in turn, with its method, path,
 * headers and body; the backend's answer (status, headers, body) goes back as it came. A backend
 * that cannot be reached (dead, or reset mid-answer) answers 502, as a real balancer does: the
 * sender redelivers, the way GitHub does.
 */
export async function roundRobinProxy(backends: string[]): Promise<RoundRobin> {
  let next = 0;
  const handed = backends.map(() => 0);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const index = next++ % backends.length;
      handed[index] = (handed[index] ?? 0) + 1;
      const target = new URL(req.url ?? '/', backends[index]);
      const body = Buffer.concat(chunks);
      const headers: IncomingHttpHeaders = { ...req.headers, host: target.host, connection: 'close' };
      const upstream = httpRequest(target, { method: req.method, headers }, (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (c: Buffer) => parts.push(c));
        answer.on('end', () => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          res.end(Buffer.concat(parts));
        });
        answer.on('error', (error) => fail(error));
      });
      const fail = (error: Error) => {
        if (res.headersSent) return res.destroy();
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`bad gateway: backend ${index}: ${error.message}`);
      };
      upstream.on('error', fail);
      upstream.end(body);
    });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    handed,
    close: async () => {
      server.closeAllConnections();
      await closeServer(server);
    },
  };
}

export interface CuttableLink {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** Connections made through it so far. */
  connections(): number;
  /** Close every connection and refuse new ones (the listener stops: connecting is refused). */
  cut(): Promise<void>;
  /** Accept connections again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** A TCP proxy to `target` (host:port), whose connections the test can cut. */
export async function cuttableLink(target: { host: string; port: number }): Promise<CuttableLink> {
  const open = new Set<Socket>();
  let made = 0;
  let server = makeServer();
  function makeServer(): NetServer {
    return createNetServer((client) => {
      made++;
      const upstream = connect(target.port, target.host);
      open.add(client);
      open.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        open.delete(client);
        open.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }
  const port = await listen(server);
  let cut = false;
  return {
    port,
    connections: () => made,
    cut: async () => {
      if (cut) return;
      cut = true;
      const closed = closeServer(server);
      for (const s of open) s.destroy();
      open.clear();
      await closed;
    },
    restore: async () => {
      if (!cut) return;
      server = makeServer();
      await listen(server, port);
      cut = false;
    },
    close: async () => {
      for (const s of open) s.destroy();
      open.clear();
      if (!cut) await closeServer(server);
      cut = true;
    },
  };
}
