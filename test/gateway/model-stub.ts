/**
 * A tiny stand-in for the lead's gateway server: `/m/<token>/<rest>` (or `/m/_/<rest>` with the
 * token in a key header or `?key=`) authorized against one fixed capability token, then handed to
 * the model handler — plus fake ports that collect wire rows and logs, and raw upstreams that
 * misbehave on purpose. Everything listens on 127.0.0.1 and closes every connection on close().
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { ModelHandler } from '../../src/gateway/models/model-proxy.js';
import type { GatewayPorts, GatewaySession, ModelRoute, WireUsage } from '../../src/gateway/types.js';
import { nullLogger } from '../../src/log/logger.js';

export const TOKEN = `tlg1_${randomBytes(32).toString('base64url')}`;
export const REAL_KEY = `sk-real-${randomBytes(12).toString('hex')}`;

export const SESSION: GatewaySession = {
  id: 'sess-1',
  workItem: 'github:acme/demo#1',
  owner: 'acme',
  repo: 'demo',
  engine: 'claude',
  cwd: '/tmp',
};

export interface FakePorts extends GatewayPorts {
  rows: WireUsage[];
  /** How many times the budget was asked (one per request that can cost tokens). */
  budgetChecks: number;
  /** Set to a reason to be over budget. */
  over: string | undefined;
  route: ModelRoute | undefined;
  /** Every log call, as JSON (to prove no secret is in any). */
  logs: string[];
}

export function fakePorts(route: ModelRoute | undefined): FakePorts {
  const logs: string[] = [];
  const log = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    logs.push(JSON.stringify({ level, message, fields }, (_k, v) => (v instanceof Error ? v.message : v)));
  };
  const logger = {
    ...nullLogger,
    debug: log('debug'),
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
  };
  const ports: FakePorts = {
    rows: [],
    budgetChecks: 0,
    over: undefined,
    route,
    logs,
    logger,
    policyFor: () => {
      throw new Error('not used by the model handler');
    },
    recordAct: async () => {
      throw new Error('not used by the model handler');
    },
    recordUsage: async (_session, usage) => {
      ports.rows.push(usage);
    },
    modelRoute: () => ports.route,
    overBudget: async () => {
      ports.budgetChecks += 1;
      return ports.over;
    },
    github: { gitUrl: 'http://127.0.0.1:9', apiUrl: 'http://127.0.0.1:9', tokenFor: async () => undefined },
  };
  return ports;
}

export interface Listening {
  url: string;
  close(): Promise<void>;
}

/** Listen on 127.0.0.1 (random port); close() drops every connection. */
export async function listen(server: Server): Promise<Listening> {
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function tokenOf(req: IncomingMessage, segment: string, query: string): string | undefined {
  if (segment !== '_') return segment;
  for (const name of ['x-api-key', 'x-goog-api-key']) {
    const v = req.headers[name];
    if (typeof v === 'string') return v;
  }
  const bearer = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '');
  return bearer?.[1] ?? new URLSearchParams(query).get('key') ?? undefined;
}

export interface Stub extends Listening {
  /** Every request line the stub received (method and raw URL), to see what the CLIs asked. */
  seen: string[];
}

export async function startStub(handler: ModelHandler, ports: GatewayPorts): Promise<Stub> {
  const seen: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    seen.push(`${req.method} ${url}`);
    const m = /^\/m\/([^/?]+)([^?]*)(\?.*)?$/.exec(url);
    const token = m ? tokenOf(req, m[1] ?? '', m[3] ?? '') : undefined;
    if (!m || token !== TOKEN) {
      res.writeHead(m ? 401 : 404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"stub: refused"}}');
      return;
    }
    const path = (m[2] ?? '') + (m[3] ?? '');
    handler(req, res, { session: SESSION, path, ports, token }).catch((error: unknown) => {
      res.destroy();
      throw error;
    });
  });
  return { ...(await listen(server)), seen };
}

/** Poll until `check` holds (an event we wait for, not a timing assertion). */
export async function waitFor(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
