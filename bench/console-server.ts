/**
 * The console under test: the real console server (src/console/server.ts: Host/Origin checks, login
 * links, cookies, login keys and tickets, the pages of dist/console-ui) with the real terminal hub
 * (src/console/terminal/hub.ts) on the bench's private tmux server, in this process. Only the
 * daemon's stores are replaced: one tmux session row (the bench's pane) whose take over is kept in
 * memory, as the take over and hand back of the API set it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildConsole } from '../scripts/build-console.js';
import { mintLoginCode } from '../src/console/auth.js';
import type { ConsoleDeps } from '../src/console/ports.js';
import type { SessionRow, TakeoverView } from '../src/console/protocol.js';
import { type ConsoleServer, startConsoleServer } from '../src/console/server.js';
import { TerminalHub } from '../src/console/terminal/hub.js';
import { nullLogger } from '../src/log/logger.js';
import { Tmux } from '../src/runners/tmux/tmux.js';
import type { BrowserTarget } from './console-browser.js';
import { type ConsoleEndpoint, login, post } from './console-client.js';
import { type Rig, TARGET } from './console-rig.js';

const ROOT = join(import.meta.dirname, '..');

export interface BenchConsole {
  server: ConsoleServer;
  hub: TerminalHub;
  endpoint: ConsoleEndpoint;
  staticDir: string;
}

/**
 * The front end as `npm run build` leaves it (dist/console-ui: `npm run bench:console` builds first);
 * when it is not there (the bench run without the build), built into bench/.out/console-ui.
 */
export async function frontEnd(out: string): Promise<string> {
  const shipped = join(ROOT, 'dist', 'console-ui');
  if (existsSync(join(shipped, 'session.html'))) return shipped;
  console.log(`no front end in ${shipped}: building it into bench/.out/console-ui …`);
  return buildConsole({ outdir: join(out, 'console-ui') });
}

function benchDeps(sessionId: string): {
  deps: ConsoleDeps;
  takeoverOf(id: string): Promise<TakeoverView | null>;
} {
  let takeover: TakeoverView | null = null;
  const createdAt = new Date().toISOString();
  const row = (): SessionRow => ({
    id: sessionId,
    workItem: 'bench/console#1',
    engine: 'claude',
    runner: 'tmux',
    tmuxTarget: TARGET,
    status: 'running',
    heldReason: takeover ? `taken over by ${takeover.by} since ${takeover.since}: hand back to go on` : null,
    takeover,
    turns: 0,
    tokens: null,
    costUsd: null,
    unpricedRows: 0,
    unmeteredTurns: 0,
    lastTurnAt: null,
    createdAt,
  });
  const none = () => Promise.reject(new Error('not served by the bench'));
  const deps: ConsoleDeps = {
    sessionRows: async () => [row()],
    sessionDetail: async (id) => (id === sessionId ? { session: row(), turns: [] } : undefined),
    turnEvents: async () => [],
    usage: none,
    acts: async () => [],
    resume: none,
    takeOver: async (id, who) => {
      if (id !== sessionId) throw new Error('no such session');
      takeover = { by: who.by, since: new Date().toISOString(), principal: who.principal };
      return takeover;
    },
    handBack: async () => {
      takeover = null;
    },
    notifyDispatcher: () => {},
    terminalOf: async (id) => (id === sessionId ? { target: TARGET, takeover } : undefined),
  };
  return { deps, takeoverOf: async (id) => (id === sessionId ? takeover : null) };
}

export async function startBenchConsole(rig: Rig, staticDir: string): Promise<BenchConsole> {
  const token = randomBytes(32).toString('base64url');
  const sessionId = randomUUID();
  const bench = benchDeps(sessionId);
  const hub = new TerminalHub({
    tmux: new Tmux({ socket: rig.socketName }),
    logger: nullLogger,
    takeoverOf: bench.takeoverOf,
  });
  rig.onCleanup(() => hub.close());
  const server = await startConsoleServer({
    host: '127.0.0.1',
    port: 0,
    sessionHours: 1,
    token,
    logger: nullLogger,
    deps: bench.deps,
    terminals: hub,
    staticDir,
  });
  rig.onCleanup(() => server.close());
  const endpoint: ConsoleEndpoint = {
    origin: server.origin,
    sessionId,
    loginLink: () => `${server.origin}/login/${mintLoginCode(token, 'bench@console').code}`,
  };
  return { server, hub, endpoint, staticDir };
}

/** Log in and take the session over: this login's terminal sockets are writers. */
export async function writerLogin(endpoint: ConsoleEndpoint) {
  const who = await login(endpoint);
  await post(endpoint, who, `/api/sessions/${endpoint.sessionId}/takeover`);
  return who;
}

/** The console's session page in a fresh browser context, logged in through a login link. */
export function consoleTarget(endpoint: ConsoleEndpoint, name: string): BrowserTarget {
  return {
    name,
    open: async (browser) => {
      const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
      const page = await context.newPage();
      // The login page keeps the login's key in localStorage, then leaves for /sessions.
      await page.goto(endpoint.loginLink());
      await page.waitForURL(`${endpoint.origin}/sessions`, { timeout: 15_000 });
      await page.goto(`${endpoint.origin}/sessions/${endpoint.sessionId}`);
      await page.waitForSelector('#terminal .xterm', { timeout: 15_000 });
      return page;
    },
  };
}
