/**
 * The console's terminal socket as the bench drives it, with the `ws` client: log in (the link →
 * the cookie and the login page's key), make a ticket with the key as a page does, then open
 * /ws/terminal/<id> with the sub-protocols `the-loop.console.v1` + `ticket.<t>` and the page's
 * Origin, as the browser does. A writer sends
 * `{t:'input', data}` and reads binary output frames, acknowledging them as the page does (at least
 * every 64 KiB); a stalled viewer connects, then neither reads nor acknowledges.
 */
import { createHmac, randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import {
  LOGIN_ID_META,
  LOGIN_KEY_META,
  type TerminalServerMessage,
  TICKET_PROTOCOL_PREFIX,
  ticketMessage,
  WS_PROTOCOL,
} from '../src/console/protocol.js';
import type { Scenario } from './console-burst.js';
import { STALL_MS } from './console-burst.js';
import type { EchoClient } from './console-echo.js';
import { sleep, until } from './console-rig.js';

export interface ConsoleEndpoint {
  /** http://127.0.0.1:<port> */
  origin: string;
  sessionId: string;
  /** A fresh login link (each is single-use). */
  loginLink(): string;
}

export interface Login {
  cookie: string;
  ticket: string;
}

const metaOf = (html: string, name: string) =>
  new RegExp(`<meta name="${name}" content="([^"]*)">`).exec(html)?.[1] ?? '';

/**
 * GET the login link (the cookie, and the login page's key and public id), then make a ticket as
 * the pages do (console/src/api.ts): HMAC-SHA256 under the key of the public id and a nonce.
 */
export async function login(endpoint: ConsoleEndpoint): Promise<Login> {
  const r = await fetch(endpoint.loginLink(), { redirect: 'manual' });
  const setCookie = r.headers.get('set-cookie') ?? '';
  const cookie = setCookie.split(';')[0] ?? '';
  const html = await r.text();
  const key = metaOf(html, LOGIN_KEY_META);
  const publicId = metaOf(html, LOGIN_ID_META);
  if (r.status !== 200 || !cookie.startsWith('loop_console=') || !key || !publicId)
    throw new Error(`login refused: ${r.status} ${html}`);
  const nonce = randomBytes(16).toString('base64url');
  const mac = createHmac('sha256', Buffer.from(key, 'base64url'))
    .update(ticketMessage(publicId, nonce))
    .digest('base64url');
  return { cookie, ticket: `${publicId}.${nonce}.${mac}` };
}

/** POST as the page does (Origin, ticket header, cookie). */
export async function post(endpoint: ConsoleEndpoint, who: Login, path: string): Promise<unknown> {
  const r = await fetch(`${endpoint.origin}${path}`, {
    method: 'POST',
    headers: {
      cookie: who.cookie,
      origin: endpoint.origin,
      'x-loop-ticket': who.ticket,
      'content-type': 'application/json',
    },
    body: '{}',
  });
  const body = await r.text();
  if (!r.ok) throw new Error(`POST ${path}: ${r.status} ${body}`);
  return body ? JSON.parse(body) : undefined;
}

export interface TerminalSocket {
  ws: WebSocket;
  hello: Extract<TerminalServerMessage, { t: 'hello' }>;
}

export async function openTerminal(endpoint: ConsoleEndpoint, who: Login): Promise<TerminalSocket> {
  const url = `${endpoint.origin.replace(/^http/, 'ws')}/ws/terminal/${endpoint.sessionId}`;
  const ws = new WebSocket(url, [WS_PROTOCOL, `${TICKET_PROTOCOL_PREFIX}${who.ticket}`], {
    headers: { cookie: who.cookie, origin: endpoint.origin },
    perMessageDeflate: false,
  });
  let hello: TerminalSocket['hello'] | undefined;
  let closed: string | undefined;
  ws.on('message', (data, isBinary) => {
    if (isBinary || hello) return;
    const message = JSON.parse(String(data)) as TerminalServerMessage;
    if (message.t === 'hello') hello = message;
  });
  ws.on('close', (code, reason) => {
    closed = `${code} ${reason.toString()}`;
  });
  ws.on('error', (error) => {
    closed = error.message;
  });
  await until(() => hello !== undefined || closed !== undefined, 'the terminal socket hello', 10_000);
  if (!hello) throw new Error(`terminal socket closed: ${closed}`);
  return { ws, hello };
}

/** The writer: keys out as `{t:'input'}`, binary output in, acknowledged at least every 64 KiB. */
export async function consoleEchoClient(endpoint: ConsoleEndpoint, who: Login): Promise<EchoClient> {
  const { ws, hello } = await openTerminal(endpoint, who);
  if (hello.role !== 'writer') throw new Error(`the bench's login is a ${hello.role}, not the writer`);
  const listeners: Array<(text: string) => void> = [];
  let written = 0;
  let acked = 0;
  let timer: NodeJS.Timeout | undefined;
  const ack = () => {
    timer = undefined;
    if (written === acked || ws.readyState !== WebSocket.OPEN) return;
    acked = written;
    ws.send(JSON.stringify({ t: 'ack', bytes: written }));
  };
  ws.on('message', (data, isBinary) => {
    if (!isBinary) return;
    const bytes = data as Buffer;
    const text = bytes.toString('latin1');
    for (const fn of listeners) fn(text);
    written += bytes.length;
    if (written - acked >= 64 * 1024) ack();
    else timer ??= setTimeout(ack, 50);
  });
  return {
    name: 'console (ws writer)',
    write: (key) => ws.send(JSON.stringify({ t: 'input', data: key })),
    onOutput: (fn) => listeners.push(fn),
    close: () => {
      if (timer) clearTimeout(timer);
      ws.close();
    },
  };
}

/**
 * A console viewer that connects, then for 3 s neither reads its socket nor acknowledges a byte.
 * Afterwards it reads again (still never acknowledging) for 300 ms: what it gets in all is what the
 * hub let out before it paused the viewer's pty (reported: a paused pty sends no more).
 */
export function stalledConsoleViewer(
  endpoint: ConsoleEndpoint,
  who: () => Login,
  hubStats: () => Array<{ role: string; paused: boolean; sent: number }>,
): Scenario {
  const received: number[] = [];
  let paused = 0;
  let runs = 0;
  return {
    name: 'stalled console viewer (3 s, no ack, no read)',
    setup: async () => {
      const { ws } = await openTerminal(endpoint, who());
      let bytes = 0;
      ws.on('message', (data, isBinary) => {
        if (isBinary) bytes += (data as Buffer).length;
      });
      // The scrollback replay / first redraw arrives, then the socket stops reading.
      await until(() => bytes > 0, 'the stalled viewer first frame', 10_000).catch(() => {});
      const socket = (ws as unknown as { _socket?: { pause(): void; resume(): void } })._socket;
      socket?.pause();
      const started = Date.now();
      return async () => {
        await sleep(Math.max(0, STALL_MS - (Date.now() - started)));
        // The hub's own word, at the end of the stall: the viewer's pty paused.
        runs += 1;
        if (hubStats().some((v) => v.role === 'viewer' && v.paused)) paused += 1;
        socket?.resume();
        await sleep(300);
        received.push(bytes);
        ws.terminate();
      };
    },
    report: () =>
      `the stalled viewer received at most ${(Math.max(0, ...received) / 1024).toFixed(0)} KiB per run in all (never acknowledging); ` +
      `at the end of the stall the hub had its pty paused (over 512 KiB unacknowledged) in ${paused} of ${runs} runs ` +
      '(in the others tmux had sent this client less than that: it drops frames for a slow client)',
  };
}

export const randomSuffix = () => randomBytes(4).toString('hex');
