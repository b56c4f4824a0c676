import { chmodSync, lstatSync, rmSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LoopError } from '../core/errors.js';
import type { Logger } from '../log/logger.js';
import { socketAlive } from '../os/socket.js';
import { ListenerGuard } from '../web/limits.js';
import { isTokenShaped } from './tokens.js';
import type { GatewayHandler, GatewayPorts, GatewaySession } from './types.js';

/**
 * The gateway's listeners: TCP on the loopback (git smart HTTP under `/git/`, model APIs under
 * `/m/<token>/`, the GitHub API under `/gh/` for clients that take an API URL) and a Unix socket
 * where everything is the GitHub API (`gh`'s `http_unix_socket`). Every request names a capability
 * token; one that is unknown, revoked or whose session is no longer active is refused before any
 * handler runs, and nothing is forwarded for it.
 */
export interface GatewayRoutes {
  git: GatewayHandler;
  github: GatewayHandler;
  model: GatewayHandler;
}

export interface GatewayOptions {
  host: string;
  port: number;
  /** The Unix socket for `gh`; undefined: none. */
  socketPath?: string | undefined;
  logger: Logger;
  /** The active session a token stands for, or undefined. */
  authorize(token: string): Promise<GatewaySession | undefined>;
  ports: GatewayPorts;
  routes: GatewayRoutes;
  /** A connection silent this long is closed (long pushes and streams keep theirs busy). */
  idleTimeoutMs: number;
  /** Bytes of request bodies read whole at once, across both listeners (default 64 MiB). */
  maxBufferedBytes?: number;
}

export interface Gateway {
  /** `http://127.0.0.1:<port>`: engines' base URLs start with it. */
  url: string;
  socketPath: string | undefined;
  close(): Promise<void>;
}

type Route = 'git' | 'github' | 'model';

/** Which route a TCP request takes, the token it carries, and the path left for the handler. */
export function routeOf(
  url: string,
  headers: IncomingMessage['headers'],
): { route: Route; token: string | undefined; path: string } | undefined {
  const m = /^\/(m|git|gh)(\/[^?]*)?(\?.*)?$/.exec(url);
  if (!m) return undefined;
  const [, prefix, rest = '', query = ''] = m;
  if (prefix === 'git') return { route: 'git', token: headerToken(headers), path: rest.slice(1) + query };
  if (prefix === 'gh') return { route: 'github', token: headerToken(headers), path: (rest || '/') + query };
  // /m/<token>/… or /m/_/… (the token in a key header: engines whose base URL is in argv).
  const seg = /^\/([^/]+)(\/.*)?$/.exec(rest);
  if (!seg) return undefined;
  const [, id = '', tail = ''] = seg;
  const token = id === '_' ? (headerToken(headers) ?? queryKey(query)) : id;
  return { route: 'model', token, path: tail + query };
}

/** A token in the headers a client may carry one in (API key headers, Bearer, token, Basic). */
export function headerToken(headers: IncomingMessage['headers']): string | undefined {
  const candidates: string[] = [];
  for (const name of ['x-api-key', 'x-goog-api-key']) {
    const v = headers[name];
    if (typeof v === 'string') candidates.push(v.trim());
  }
  const auth = typeof headers.authorization === 'string' ? headers.authorization.trim() : '';
  const scheme = /^(bearer|token|basic)\s+(\S+)$/i.exec(auth);
  if (scheme) {
    const [, kind = '', value = ''] = scheme;
    if (kind.toLowerCase() === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      candidates.push(decoded.slice(colon + 1), decoded.slice(0, Math.max(colon, 0)));
    } else candidates.push(value);
  }
  return candidates.find(isTokenShaped);
}

const queryKey = (query: string): string | undefined => {
  const key = new URLSearchParams(query.replace(/^\?/, '')).get('key');
  return key && isTokenShaped(key) ? key : undefined;
};

function refuse(res: ServerResponse, route: Route | undefined, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // git prints a text/plain body of a failed request as `remote: …` lines; API clients read JSON.
  const json = route === 'model' || route === 'github';
  const body = json ? `${JSON.stringify({ error: { message }, message })}\n` : `${message}\n`;
  res.writeHead(status, {
    'content-type': json ? 'application/json' : 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

async function dispatch(
  options: GatewayOptions,
  req: IncomingMessage,
  res: ServerResponse,
  socket: boolean,
): Promise<void> {
  const url = req.url ?? '/';
  if (!socket && url === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}\n');
    return;
  }
  const found = socket
    ? { route: 'github' as const, token: headerToken(req.headers), path: url }
    : routeOf(url, req.headers);
  if (!found) {
    refuse(res, undefined, 404, 'not a gateway route');
    return;
  }
  const session = found.token ? await options.authorize(found.token) : undefined;
  if (!found.token || !session) {
    // Claude Code checks that its base URL answers before its first request (HEAD on the prefix).
    if (found.route === 'model' && req.method === 'HEAD') {
      res.writeHead(found.token ? 401 : 200);
      res.end();
      return;
    }
    options.logger.warn('gateway request refused: no valid capability token', {
      route: found.route,
      method: req.method,
    });
    refuse(
      res,
      found.route,
      found.route === 'git' ? 403 : 401,
      '[the-loop gateway] missing, unknown or revoked capability token (the session may have ended)',
    );
    return;
  }
  const handler = options.routes[found.route];
  handler(req, res, { session, path: found.path, ports: options.ports, token: found.token }).catch(
    (error: unknown) => {
      options.logger.error('gateway handler failed', { route: found.route, session: session.id, error });
      refuse(res, found.route, 502, '[the-loop gateway] internal error');
    },
  );
}

/** A request, dispatched; a failure before its handler (the token lookup) is answered 502 and logged. */
function answer(options: GatewayOptions, req: IncomingMessage, res: ServerResponse, socket: boolean): void {
  dispatch(options, req, res, socket).catch((error: unknown) => {
    options.logger.error('gateway request failed', { error });
    refuse(res, undefined, 502, '[the-loop gateway] internal error');
  });
}

function listen(server: Server, target: { port: number; host: string } | { path: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      resolve();
    };
    if ('path' in target) server.listen(target.path, done);
    else server.listen(target.port, target.host, done);
  });
}

/**
 * The gateway's listener limits (web/limits.ts), one guard for the TCP port and the Unix socket.
 * Pushes and model streams run long: no whole-request deadline, but a silent connection ends. The
 * engines can open connections at will (a hostile model can): past the cap the longest-waiting idle
 * connection is closed, never a stream in progress, and a newcomer is refused only when every
 * connection is busy. Bodies read whole (a checked model request, a GitHub API call) share a budget.
 */
function gatewayGuard(options: GatewayOptions): ListenerGuard {
  return new ListenerGuard(
    {
      maxConnections: MAX_CONNECTIONS,
      maxBufferedBytes: options.maxBufferedBytes ?? 64 * 1024 * 1024,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 0,
      keepAliveTimeoutMs: 5_000,
      idleTimeoutMs: options.idleTimeoutMs,
    },
    options.logger,
    'the gateway',
  );
}

/** Open connections across the gateway's listeners: a few engines' streams, pushes and gh calls. */
export const MAX_CONNECTIONS = 256;

async function openSocket(options: GatewayOptions, path: string, guard: ListenerGuard): Promise<Server> {
  try {
    if (lstatSync(path).isSocket()) {
      if (await socketAlive(path)) {
        throw new LoopError('session-busy', `another process serves the gateway socket ${path}`, {
          hint: 'Stop it, or set gateway.socket to another path.',
        });
      }
      rmSync(path, { force: true });
    } else {
      throw new LoopError('config-invalid', `${path} exists and is not a socket`, {
        hint: 'Remove it, or set gateway.socket to another path.',
      });
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const server = guard.createServer((req, res) => answer(options, req, res, true));
  await listen(server, { path });
  chmodSync(path, 0o600);
  return server;
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });

/** Start the gateway's listeners. A port in use is a clear error (the caller may retry with 0). */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const guard = gatewayGuard(options);
  const tcp = guard.createServer((req, res) => answer(options, req, res, false));
  await listen(tcp, { port: options.port, host: options.host });
  let unix: Server | undefined;
  try {
    if (options.socketPath) unix = await openSocket(options, options.socketPath, guard);
  } catch (error) {
    await closeServer(tcp);
    throw error;
  }
  const address = tcp.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    socketPath: options.socketPath,
    close: async () => {
      await Promise.all([closeServer(tcp), unix ? closeServer(unix) : Promise.resolve()]);
      if (options.socketPath) rmSync(options.socketPath, { force: true });
    },
  };
}
