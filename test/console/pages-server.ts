/**
 * A stand-in for the daemon's console listener, for the page test only: it serves the built front
 * end with the plan's headers (the CSP above all) and answers the wire contract of
 * src/console/protocol.ts with canned data (pages-fixtures.ts). Like the daemon, it logs in through
 * /login/<anything> (the login page with a key and public id) and checks the ticket the pages make
 * with that key on every API request and socket. The real server, its auth and its terminal hub are
 * tested on their own; this one lets the test check what the pages make of data.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { type WebSocket, WebSocketServer } from 'ws';
import { renderLogin } from '../../src/console/pages.js';
import {
  type LiveMessage,
  type SessionRow,
  type TakeoverView,
  TICKET_PROTOCOL_PREFIX,
  ticketMessage,
  WS_PROTOCOL,
} from '../../src/console/protocol.js';
import { ACTS, detailOf, EVENTS, ROWS, usageReport } from './pages-fixtures.js';

/** The plan's CSP (.plan/console.md), exactly: the pages must run under it. */
export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const HEADERS = {
  'content-security-policy': CSP,
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  map: 'application/json; charset=utf-8',
};

export interface Post {
  path: string;
  body: unknown;
  /** The ticket was made with the login's key (the POST is refused otherwise). */
  ticketOk: boolean;
  origin: string | undefined;
}

export interface FakeConsole {
  url: string;
  /** The login's public id (a ticket's first part). */
  publicId: string;
  posts: Post[];
  gets: string[];
  /** JSON frames the terminal sockets received (acks, input, resize). */
  terminalIn: Record<string, unknown>[];
  setRows(rows: SessionRow[]): void;
  sendTerminal(data: Buffer | Record<string, unknown>): void;
  terminals(): number;
  close(): Promise<void>;
}

const PAGE_ROUTES: [RegExp, string][] = [
  [/^\/sessions$/, 'sessions'],
  [/^\/sessions\/[^/]+$/, 'session'],
  [/^\/usage$/, 'usage'],
  [/^\/acts$/, 'acts'],
];

function send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  res.writeHead(status, { ...HEADERS, 'content-type': type });
  res.end(body);
}

const json = (res: ServerResponse, status: number, value: unknown) =>
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value));

/** What the stand-in holds: its one login, its sessions, what it was sent, its open sockets. */
interface State {
  publicId: string;
  key: string;
  rows: SessionRow[];
  posts: Post[];
  gets: string[];
  terminalIn: Record<string, unknown>[];
  lives: Set<WebSocket>;
  terms: Set<WebSocket>;
}

function broadcast(sockets: Set<WebSocket>, message: unknown): void {
  for (const ws of sockets) ws.send(JSON.stringify(message));
}

function setRows(state: State, rows: SessionRow[]): void {
  state.rows = rows;
  broadcast(state.lives, { t: 'sessions', rows } satisfies LiveMessage);
}

/** The ticket was made with the login's key, as the daemon checks it (auth.ts). */
function ticketOk(state: State, ticket: string | undefined): boolean {
  const [publicId, nonce, mac] = (ticket ?? '').split('.');
  if (publicId !== state.publicId || !nonce || !mac) return false;
  const expected = createHmac('sha256', Buffer.from(state.key, 'base64url'))
    .update(ticketMessage(publicId, nonce))
    .digest('base64url');
  return mac === expected;
}

/** POST: recorded; refused without a valid ticket; take over and hand back act as the daemon's would. */
function post(state: State, req: IncomingMessage, res: ServerResponse, path: string, body: string) {
  const ok = ticketOk(state, req.headers['x-loop-ticket'] as string | undefined);
  state.posts.push({
    path,
    body: body ? JSON.parse(body) : undefined,
    ticketOk: ok,
    origin: req.headers.origin,
  });
  if (!ok) return json(res, 403, { error: 'missing or invalid ticket' });
  const takeover: TakeoverView = { by: 'ada@laptop', since: '2025-06-01T10:30:00.000Z', principal: 'pub1' };
  const tmux = (change: Partial<SessionRow>) =>
    setRows(
      state,
      state.rows.map((r) => (r.id === 's-tmux' ? { ...r, ...change } : r)),
    );
  if (path.endsWith('/takeover')) {
    broadcast(state.terms, { t: 'role', role: 'writer', takeover });
    tmux({ status: 'held', takeover });
  } else if (path.endsWith('/handback')) {
    broadcast(state.terms, { t: 'role', role: 'viewer', takeover: null });
    tmux({ status: 'running', takeover: null });
  }
  // The daemon's answers: a resume's outcome, a take over's state.
  if (path.endsWith('/resume')) return json(res, 200, { kind: 'raised', amount: 5, again: null });
  json(res, 200, { takeover: path.endsWith('/takeover') ? takeover : null });
}

function get(state: State, req: IncomingMessage, res: ServerResponse, url: URL) {
  const path = url.pathname;
  state.gets.push(`${path}${url.search}`);
  if (!ticketOk(state, req.headers['x-loop-ticket'] as string | undefined)) {
    return json(res, 403, { error: 'missing or invalid ticket' });
  }
  if (path === '/api/sessions') return json(res, 200, state.rows);
  const detail = /^\/api\/sessions\/([^/]+)$/.exec(path);
  if (detail) {
    const found = detailOf(decodeURIComponent(detail[1] ?? ''));
    return found ? json(res, 200, found) : json(res, 404, { error: 'no such session' });
  }
  if (path === '/api/usage') return json(res, 200, usageReport(url.searchParams.get('by') ?? 'day'));
  if (path === '/api/acts')
    return json(res, 200, url.searchParams.get('breaches') === '1' ? ACTS.filter((a) => a.breach) : ACTS);
  json(res, 404, { error: 'not found' });
}

/** A page as built, the login page with the login filled in (as the daemon does), or an asset. */
function serveFile(state: State, dir: string, res: ServerResponse, url: URL) {
  if (url.pathname.startsWith('/login/')) {
    const template = readFileSync(join(dir, 'login.html'), 'utf8');
    const html = renderLogin(template, { key: state.key, publicId: state.publicId });
    return send(res, 200, 'text/html; charset=utf-8', html);
  }
  const page = PAGE_ROUTES.find(([re]) => re.test(url.pathname))?.[1];
  if (page) return send(res, 200, 'text/html; charset=utf-8', readFileSync(join(dir, `${page}.html`)));
  const asset = /^\/assets\/([\w-]+\.(js|css|map))$/.exec(url.pathname);
  if (asset?.[1] && asset[2]) {
    try {
      return send(res, 200, TYPES[asset[2]] ?? 'text/plain', readFileSync(join(dir, 'assets', asset[1])));
    } catch {
      // Not built: a 404, as the daemon answers.
    }
  }
  send(res, 404, 'text/plain', 'not found');
}

function onLive(state: State, ws: WebSocket): void {
  state.lives.add(ws);
  ws.on('close', () => state.lives.delete(ws));
  ws.send(JSON.stringify({ t: 'sessions', rows: state.rows } satisfies LiveMessage));
  ws.on('message', (data) => {
    const message = JSON.parse(String(data)) as { t: string; sessionId: string | null };
    const detail = message.sessionId ? detailOf(message.sessionId) : undefined;
    if (!detail || !message.sessionId) return;
    ws.send(JSON.stringify({ t: 'session', detail } satisfies LiveMessage));
    if (detail.session.tmuxTarget !== null) return;
    ws.send(
      JSON.stringify({ t: 'events', sessionId: message.sessionId, events: EVENTS } satisfies LiveMessage),
    );
  });
}

function onTerminal(state: State, ws: WebSocket): void {
  state.terms.add(ws);
  ws.on('close', () => state.terms.delete(ws));
  ws.on('message', (data, binary) => {
    if (!binary) state.terminalIn.push(JSON.parse(String(data)) as Record<string, unknown>);
  });
  ws.send(JSON.stringify({ t: 'hello', role: 'viewer', cols: 100, rows: 30, takeover: null }));
}

/** Both sockets need the protocol and a valid ticket among the offered sub-protocols. */
function acceptSockets(state: State, server: Server): WebSocketServer {
  const wss = new WebSocketServer({ noServer: true, handleProtocols: () => WS_PROTOCOL });
  server.on('upgrade', (req, socket, head) => {
    const offered = String(req.headers['sec-websocket-protocol'] ?? '').split(/\s*,\s*/);
    const ticket = offered
      .find((p) => p.startsWith(TICKET_PROTOCOL_PREFIX))
      ?.slice(TICKET_PROTOCOL_PREFIX.length);
    if (!offered.includes(WS_PROTOCOL) || !ticketOk(state, ticket)) {
      socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path === '/ws/live') onLive(state, ws);
      else if (path.startsWith('/ws/terminal/')) onTerminal(state, ws);
      else ws.close(4404, 'no such socket');
    });
  });
  return wss;
}

export async function startFakeConsole(dir: string): Promise<FakeConsole> {
  const state: State = {
    publicId: randomBytes(8).toString('hex'),
    key: randomBytes(32).toString('base64url'),
    rows: ROWS,
    posts: [],
    gets: [],
    terminalIn: [],
    lives: new Set(),
    terms: new Set(),
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (!url.pathname.startsWith('/api/')) serveFile(state, dir, res, url);
      else if (req.method === 'POST') post(state, req, res, url.pathname, Buffer.concat(chunks).toString());
      else get(state, req, res, url);
    });
  });
  const wss = acceptSockets(state, server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    publicId: state.publicId,
    posts: state.posts,
    gets: state.gets,
    terminalIn: state.terminalIn,
    setRows: (rows) => setRows(state, rows),
    sendTerminal(data) {
      for (const ws of state.terms) {
        if (Buffer.isBuffer(data)) ws.send(data, { binary: true });
        else ws.send(JSON.stringify(data));
      }
    },
    terminals: () => state.terms.size,
    async close() {
      for (const ws of [...state.lives, ...state.terms]) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
