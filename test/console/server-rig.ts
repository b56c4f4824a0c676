/**
 * The real console server (src/console/server.ts) on a real listener (port 0), with tiny page
 * templates in a temp dir, recording stand-ins for the daemon's functions and the terminal hub, a
 * raw HTTP client that sends exactly the headers a test names (Host and Origin included), and a
 * login done as a browser does it: the link's login page read for the key, tickets made with it.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { mintLoginCode } from '../../src/console/auth.js';
import type { ConsoleDeps, TerminalPort } from '../../src/console/ports.js';
import {
  LOGIN_ID_META,
  LOGIN_KEY_META,
  type SessionRow,
  type TakeoverView,
  ticketMessage,
} from '../../src/console/protocol.js';
import {
  type ConsoleServer,
  type ConsoleServerOptions,
  startConsoleServer,
} from '../../src/console/server.js';
import { LoopError } from '../../src/core/errors.js';
import type { UsageReport } from '../../src/core/ports/ledger.js';
import { createLogger, memorySink } from '../../src/log/logger.js';

export const TOKEN = 'dGVzdC10b2tlbi10aGF0LWlzLWxvbmctZW5vdWdoLXRvLXBhc3M';
export const SESSION = '0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d';
export const TMUX_SESSION = '1b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d';

export const ROW: SessionRow = {
  id: SESSION,
  workItem: 'github:o/r#1',
  engine: 'claude',
  runner: 'process',
  tmuxTarget: null,
  status: 'idle',
  heldReason: null,
  takeover: null,
  turns: 1,
  tokens: 10,
  costUsd: null,
  unpricedRows: 0,
  unmeteredTurns: 0,
  lastTurnAt: null,
  createdAt: '2025-01-01T00:00:00.000Z',
};

export interface Calls {
  resume: Array<{ id: string; raise: string | undefined }>;
  takeOver: Array<{ id: string; by: string; principal: string | null }>;
  handBack: string[];
  notified: number;
  attached: Array<{ sessionId: string; target: string; principal: string }>;
  setTakeover: Array<{ sessionId: string; takeover: TakeoverView | null }>;
}

export function recordingDeps(calls: Calls, rows: () => SessionRow[] = () => [ROW]): ConsoleDeps {
  const known = (id: string) => {
    if (id !== SESSION && id !== TMUX_SESSION) throw new LoopError('session-missing', `no session ${id}`);
  };
  return {
    sessionRows: async () => rows(),
    sessionDetail: async (id) => (id === SESSION ? { session: ROW, turns: [] } : undefined),
    turnEvents: async () => [],
    usage: async (q) =>
      ({ since: q.since.toISOString(), until: q.until.toISOString(), by: q.by }) as UsageReport,
    acts: async () => [],
    resume: async (id, raise) => {
      known(id);
      calls.resume.push({ id, raise });
      return { resumed: true };
    },
    takeOver: async (id, who) => {
      known(id);
      calls.takeOver.push({ id, ...who });
      return { by: who.by, since: '2025-01-01T00:00:00.000Z', principal: who.principal };
    },
    handBack: async (id) => {
      known(id);
      calls.handBack.push(id);
    },
    notifyDispatcher: () => {
      calls.notified++;
    },
    terminalOf: async (id) => (id === TMUX_SESSION ? { target: 'loop-x', takeover: null } : undefined),
  };
}

/** A hub that records what it is given and keeps the sockets open (the real one: helper tests). */
export function recordingTerminals(calls: Calls): TerminalPort & { sockets: WebSocket[] } {
  const sockets: WebSocket[] = [];
  return {
    sockets,
    attach: (socket, viewer) => {
      sockets.push(socket);
      calls.attached.push({
        sessionId: viewer.sessionId,
        target: viewer.target,
        principal: viewer.principal,
      });
    },
    setTakeover: (sessionId, takeover) => calls.setTakeover.push({ sessionId, takeover }),
    closeSession: () => {},
    counts: () => ({ viewers: sockets.length, sessions: 0 }),
    close: async () => {
      for (const s of sockets) s.terminate();
    },
  };
}

export const PAGE = (name: string) =>
  `<!doctype html><html><head><title>${name}</title></head><body>${name}</body></html>\n`;

export const LOGIN_PAGE =
  `<!doctype html><html><head><meta name="${LOGIN_KEY_META}" content="">\n` +
  `<meta name="${LOGIN_ID_META}" content=""><title>login</title></head><body>login</body></html>\n`;

export function writeStatic(): string {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-console-'));
  for (const name of ['sessions', 'session', 'usage', 'acts'])
    writeFileSync(join(dir, `${name}.html`), PAGE(name));
  writeFileSync(join(dir, 'login.html'), LOGIN_PAGE);
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'assets', 'app.js'), 'console.log(1);\n');
  writeFileSync(join(dir, 'assets', 'app.css'), 'body{}\n');
  writeFileSync(join(dir, 'secret.txt'), 'outside the assets\n');
  return dir;
}

export interface Rig {
  server: ConsoleServer;
  port: number;
  origin: string;
  host: string;
  calls: Calls;
  logLines: string[];
  terminals: ReturnType<typeof recordingTerminals>;
  close(): Promise<void>;
}

export async function startRig(options: Partial<ConsoleServerOptions> = {}): Promise<Rig> {
  const dir = writeStatic();
  const sink = memorySink();
  const calls: Calls = { resume: [], takeOver: [], handBack: [], notified: 0, attached: [], setTakeover: [] };
  const terminals = recordingTerminals(calls);
  const server = await startConsoleServer({
    host: '127.0.0.1',
    port: 0,
    sessionHours: 12,
    token: TOKEN,
    logger: createLogger({ level: 'debug', sinks: [sink] }),
    deps: recordingDeps(calls),
    terminals,
    staticDir: dir,
    live: { rowsMs: 50, eventsMs: 50 },
    ...options,
  });
  return {
    server,
    port: server.port,
    origin: `http://127.0.0.1:${server.port}`,
    host: `127.0.0.1:${server.port}`,
    calls,
    logLines: sink.lines,
    terminals,
    close: async () => {
      await terminals.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request with exactly these headers (Host defaults to the listener's address). */
export function http(
  rig: Pick<Rig, 'port' | 'host'>,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: rig.port,
        path,
        method: options.method ?? 'GET',
        headers: { host: rig.host, ...options.headers },
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A login as a browser holds it: the cookie, and the key and public id its login page carried. */
export interface BrowserLogin {
  sid: string;
  publicId: string;
  key: string;
  answer: Answer;
}

/** A meta tag's content in a page ('' when absent). */
export const metaOf = (html: string, name: string): string =>
  new RegExp(`<meta name="${name}" content="([^"]*)">`).exec(html)?.[1] ?? '';

/**
 * Log in as a browser does: GET a freshly minted link, keep the cookie, and read the login page's
 * key and public id (the browser's login.ts keeps them in localStorage).
 */
export async function logIn(rig: Pick<Rig, 'port' | 'host'>, who = 'ann@box'): Promise<BrowserLogin> {
  const { code } = mintLoginCode(TOKEN, who);
  const answer = await http(rig, `/login/${code}`);
  const cookie = String(answer.headers['set-cookie'] ?? '');
  const sid = /loop_console=([^;]+)/.exec(cookie)?.[1] ?? '';
  return {
    sid,
    publicId: metaOf(answer.body, LOGIN_ID_META),
    key: metaOf(answer.body, LOGIN_KEY_META),
    answer,
  };
}

/** A ticket made as the pages make it (console/src/api.ts, with WebCrypto): HMAC-SHA256 under the key. */
export function makeTicket(
  login: Pick<BrowserLogin, 'publicId' | 'key'>,
  nonce = randomBytes(16).toString('base64url'),
): string {
  const mac = createHmac('sha256', Buffer.from(login.key, 'base64url'))
    .update(ticketMessage(login.publicId, nonce))
    .digest('base64url');
  return `${login.publicId}.${nonce}.${mac}`;
}

/** The headers a console page's fetch sends: the cookie and a ticket. */
export const asPage = (login: BrowserLogin): Record<string, string> => ({
  cookie: `loop_console=${login.sid}`,
  'x-loop-ticket': makeTicket(login),
});

/** A WebSocket attempt: opened (with its protocol), or refused with an HTTP status. */
export function wsAttempt(
  rig: Rig,
  path: string,
  options: { protocols?: string[]; headers?: Record<string, string>; origin?: string; maxPayload?: number },
): Promise<{ ws: WebSocket; protocol: string; messages: string[] } | { status: number }> {
  return new Promise((resolve, reject) => {
    // Collected from the start: the first message may come in the same packet as the handshake.
    const messages: string[] = [];
    const ws = new WebSocket(`ws://127.0.0.1:${rig.port}${path}`, options.protocols ?? [], {
      headers: { host: rig.host, ...options.headers },
      ...(options.origin !== undefined ? { origin: options.origin } : {}),
      ...(options.maxPayload !== undefined ? { maxPayload: options.maxPayload } : {}),
    });
    ws.on('message', (data) => messages.push(String(data)));
    ws.once('open', () => resolve({ ws, protocol: ws.protocol, messages }));
    ws.once('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode ?? 0 });
      res.resume();
      ws.terminate();
    });
    ws.on('error', (error) => reject(error));
  });
}

/** Wait until `probe` holds (polling), or fail after `ms`. */
export async function until(what: string, probe: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
