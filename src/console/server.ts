import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { LoopError } from '../core/errors.js';
import type { Logger } from '../log/logger.js';
import { type ListenerCounts, ListenerGuard, type ListenerLimits } from '../web/limits.js';
import type { Access } from './access.js';
import { allowedHostValues, allowedOriginValues, type Bind, ConsoleAuth, consoleOrigin } from './auth.js';
import { secure, sendError } from './http.js';
import { LiveHub, type LiveOptions } from './live.js';
import { defaultStaticDir, loadPages } from './pages.js';
import type { ConsoleDeps, TerminalPort } from './ports.js';
import { handleRequest, type RouteContext } from './routes.js';
import { chooseProtocol, handleUpgrade } from './upgrade.js';

/**
 * The console's own listener (never the webhook one, which may face the internet through a
 * proxy), under the same listener limits (web/limits.ts).
 */

/** A WebSocket message larger than this is refused by `ws` (close 1009); a page sends a few bytes. */
export const MAX_WS_PAYLOAD = 64 * 1024;

/**
 * The console's listener limits: pages and API answers are small and quick, so headers and whole
 * requests get a few seconds. The 512 connections are HTTP's: an upgraded socket leaves that count
 * (web/limits.ts) and is capped by its hub instead (the terminal hub's viewers, the live hub's
 * pages), so neither kind can crowd out the other, and idle connections never shed a socket.
 */
export const CONSOLE_LIMITS: Partial<ListenerLimits> = {
  maxConnections: 512,
  maxBufferedBytes: 4 * 1024 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 15_000,
};

export interface ConsoleServerOptions extends Omit<Bind, 'port'> {
  port: number;
  sessionHours: number;
  /** The console token (console-token in the data dir). */
  token: string;
  logger: Logger;
  deps: ConsoleDeps;
  terminals?: TerminalPort | undefined;
  /** Where the built front end is (default: dist/console-ui). */
  staticDir?: string | undefined;
  limits?: Partial<ListenerLimits> | undefined;
  live?: LiveOptions | undefined;
  now?: () => number;
}

export interface ConsoleServer {
  /** Where it listens (the address bound). */
  url: string;
  /** The origin links and pages use: publicOrigin, else the loopback URL. */
  origin: string;
  port: number;
  auth: ConsoleAuth;
  stats(): ListenerCounts & { live: number; liveRefused: number };
  close(): Promise<void>;
}

export async function startConsoleServer(options: ConsoleServerOptions): Promise<ConsoleServer> {
  const { logger } = options;
  const auth = new ConsoleAuth({
    token: options.token,
    sessionHours: options.sessionHours,
    now: options.now,
  });
  // Filled in once the port is known: until then no Host is allowed.
  const access: Access = { auth, hosts: new Set(), origins: new Set() };
  const pages = loadPages(options.staticDir ?? defaultStaticDir());
  if (pages.missing.length > 0) {
    logger.warn('console: front end files missing (run `npm run build`)', {
      dir: pages.dir,
      missing: pages.missing,
    });
  }
  const live = new LiveHub(options.deps, logger, options.live);
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_WS_PAYLOAD,
    perMessageDeflate: false,
    handleProtocols: chooseProtocol,
  });
  const ctx: RouteContext = {
    access,
    deps: options.deps,
    terminals: options.terminals,
    logger,
    pages,
    secureCookie: options.publicOrigin?.startsWith('https://') ?? false,
    sessionHours: options.sessionHours,
  };
  const guard = new ListenerGuard({ ...CONSOLE_LIMITS, ...options.limits }, logger, 'the console listener');
  const upgrades = { access, wss, live, terminals: options.terminals, deps: options.deps, logger };
  const server: Server = guard.createServer(
    (req, res) => {
      Promise.resolve(handleRequest(ctx, req, res)).catch((error: unknown) => {
        logger.error('console: request failed', { error });
        secure(res);
        sendError(res, 500, 'internal error');
      });
    },
    // Through the guard: the socket leaves HTTP's count before anything is checked or written.
    (req, socket, head) => handleUpgrade(upgrades, req, socket, head),
  );
  const port = await listen(server, options);
  const bind: Bind = { ...options, port };
  access.hosts = allowedHostValues(bind);
  access.origins = allowedOriginValues(bind);
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${port}`,
    origin: consoleOrigin(bind),
    port,
    auth,
    stats: () => {
      const counts = live.counts();
      return { ...guard.stats(), live: counts.clients, liveRefused: counts.refused };
    },
    close: async () => {
      live.close();
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      wss.close();
    },
  };
}

/** Listen, or a clear error naming the console's keys. */
async function listen(server: Server, at: { host: string; port: number }): Promise<number> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(at.port, at.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new LoopError(
      'config-invalid',
      `the console cannot listen on ${at.host}:${at.port}: ${code ?? String(error)}`,
      {
        cause: error,
        hint:
          code === 'EADDRINUSE'
            ? 'Another process uses that port: set console.port (or console.enabled: false).'
            : 'Check console.host and console.port.',
      },
    );
  }
  return (server.address() as AddressInfo).port;
}
