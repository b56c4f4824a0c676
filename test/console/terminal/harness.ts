import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { TakeoverView, TerminalServerMessage } from '../../../src/console/protocol.js';
import { TerminalHub, type TerminalHubOptions } from '../../../src/console/terminal/hub.js';
import { type Logger, nullLogger } from '../../../src/log/logger.js';
import { Tmux } from '../../../src/runners/tmux/tmux.js';
import { stopTmuxServer } from '../../helpers/tmux.js';

/**
 * The terminal hub in-process behind a bare `ws` server on loopback, with its own private tmux server
 * (`tmux -L <unique>`): for the hub's tests and for the console bench (key echo latency, a stalled
 * viewer under a burst). No auth here — the console server (src/console/) does that before `attach`.
 * A client connects to `/ws/terminal/<sessionId>?as=<principal>`. A plain map stands for the store:
 * the hub's takeoverOf reads it, as main-console.ts's reads SQLite.
 */

export interface Harness {
  tmux: Tmux;
  hub: TerminalHub;
  port: number;
  /** Start a tmux session of this size running argv (no shell unless argv asks for one). */
  newSession(
    argv: string[],
    size?: { cols: number; rows: number },
  ): Promise<{ sessionId: string; target: string }>;
  /** Take over (principal) or hand back (null), as the console server would after its store. */
  setTakeover(sessionId: string, principal: string | null): void;
  /** Only the store changes, as `the-loop sessions takeover|handback` (another process) does it. */
  storeTakeover(sessionId: string, principal: string | null): void;
  /**
   * `carrying`: the take over this attach carries, as the server read it earlier (a stale read),
   * instead of the store's current one; a principal, or null for none.
   */
  connect(
    sessionId: string,
    principal: string,
    options?: { autoAck?: boolean; carrying?: string | null },
  ): TestClient;
  close(): Promise<void>;
}

export async function startHarness(
  options: {
    limits?: TerminalHubOptions['limits'];
    logger?: Logger;
    maxPayload?: number;
    /** Stands between the hub and the store (to hold a read back); the store's read by default. */
    takeoverOf?: (sessionId: string, read: () => TakeoverView | null) => Promise<TakeoverView | null>;
  } = {},
): Promise<Harness> {
  const tmux = new Tmux({ socket: `the-loop-console-${randomUUID().slice(0, 8)}` });
  const sessions = new Map<string, { target: string; takeover: TakeoverView | null }>();
  const stored = (sessionId: string) => sessions.get(sessionId)?.takeover ?? null;
  const hub = new TerminalHub({
    tmux,
    logger: options.logger ?? nullLogger,
    limits: options.limits,
    takeoverOf: (sessionId) =>
      options.takeoverOf
        ? options.takeoverOf(sessionId, () => stored(sessionId))
        : Promise.resolve(stored(sessionId)),
  });
  const takeoverBy = (principal: string | null): TakeoverView | null =>
    principal === null ? null : { by: principal, since: new Date().toISOString(), principal };
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    maxPayload: options.maxPayload ?? 64 * 1024,
  });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  wss.on('connection', (socket, request) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const sessionId = decodeURIComponent(url.pathname.replace(/^\/ws\/terminal\//, ''));
    const session = sessions.get(sessionId);
    if (!session) return void socket.close(4404, 'no such session');
    const carrying = url.searchParams.get('carrying');
    hub.attach(socket, {
      sessionId,
      target: session.target,
      principal: url.searchParams.get('as') ?? 'nobody',
      takeover: carrying === null ? session.takeover : takeoverBy(carrying === '' ? null : carrying),
    });
  });
  const port = (wss.address() as AddressInfo).port;
  return {
    tmux,
    hub,
    port,
    async newSession(argv, size = { cols: 80, rows: 20 }) {
      const sessionId = randomUUID().slice(0, 8);
      const target = `loop-test-${sessionId}`;
      const created = await tmux.run([
        'new-session',
        '-d',
        '-s',
        target,
        '-x',
        String(size.cols),
        '-y',
        String(size.rows),
        '--',
        ...argv,
      ]);
      if (!created.ok) throw new Error(`tmux new-session failed: ${created.stderr}`);
      // As agent windows are made (plan: `window-size manual`); the hub makes sure of it too.
      await tmux.run(['set-option', '-w', '-t', `=${target}:`, 'window-size', 'manual']);
      sessions.set(sessionId, { target, takeover: null });
      return { sessionId, target };
    },
    setTakeover(sessionId, principal) {
      const session = sessions.get(sessionId);
      if (!session) throw new Error(`no session ${sessionId}`);
      session.takeover = takeoverBy(principal);
      hub.setTakeover(sessionId, session.takeover);
    },
    storeTakeover(sessionId, principal) {
      const session = sessions.get(sessionId);
      if (!session) throw new Error(`no session ${sessionId}`);
      session.takeover = takeoverBy(principal);
    },
    connect: (sessionId, principal, clientOptions) => {
      const carrying =
        clientOptions?.carrying === undefined
          ? ''
          : `&carrying=${encodeURIComponent(clientOptions.carrying ?? '')}`;
      return new TestClient(
        `ws://127.0.0.1:${port}/ws/terminal/${sessionId}?as=${principal}${carrying}`,
        clientOptions,
      );
    },
    async close() {
      await hub.close();
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await stopTmuxServer(tmux);
    },
  };
}

/** A terminal socket's browser side: control messages, output bytes, acknowledgements on demand. */
export class TestClient {
  readonly ws: WebSocket;
  readonly messages: TerminalServerMessage[] = [];
  /** Output bytes received (binary frames). */
  received = 0;
  /** The output as text (only its last 4 MiB are kept). */
  text = '';
  closeCode: number | undefined;
  closeReason = '';
  readonly opened: Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: Array<() => void> = [];
  autoAck: boolean;

  constructor(url: string, options: { autoAck?: boolean } = {}) {
    this.autoAck = options.autoAck ?? true;
    this.ws = new WebSocket(url);
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
    });
    this.opened.catch(() => {});
    this.closed = new Promise((resolve) => {
      this.ws.once('close', (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        resolve({ code, reason: this.closeReason });
        this.wake();
      });
    });
    this.ws.on('error', () => {});
    this.ws.on('message', (data, isBinary) => {
      if (isBinary) {
        const bytes = data as Buffer;
        this.received += bytes.length;
        this.text = (this.text + bytes.toString('latin1')).slice(-4 * 1024 * 1024);
        if (this.autoAck) this.ack();
      } else this.messages.push(JSON.parse(String(data)) as TerminalServerMessage);
      this.wake();
    });
  }

  ack(): void {
    this.sendJson({ t: 'ack', bytes: this.received });
  }

  sendJson(value: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(value));
  }

  type(data: string): void {
    this.sendJson({ t: 'input', data });
  }

  resize(cols: number, rows: number): void {
    this.sendJson({ t: 'resize', cols, rows });
  }

  /** A ping answered: the server has handled every frame sent before it (ws handles frames in order). */
  roundTrip(): Promise<void> {
    return new Promise((resolve) => {
      this.ws.once('pong', () => resolve());
      this.ws.ping();
    });
  }

  message<T extends TerminalServerMessage['t']>(t: T): Extract<TerminalServerMessage, { t: T }> | undefined {
    return this.messages.find((m) => m.t === t) as Extract<TerminalServerMessage, { t: T }> | undefined;
  }

  /** Wait until `check` holds (checked on every frame and at the close); rejects after `ms`. */
  until(check: () => boolean, ms = 20_000, what = 'condition'): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== test);
        reject(new Error(`timed out waiting for ${what}`));
      }, ms);
      const test = () => {
        if (!check()) return;
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== test);
        resolve();
      };
      this.waiters.push(test);
      test();
    });
  }

  close(): void {
    this.ws.close();
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

/** Poll `check` until it holds (for state outside a socket: a pane, a file, a count). */
export async function eventually<T>(
  check: () => Promise<T | undefined> | T | undefined,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A pane program that records every byte it reads (as hex, one read per line, in `file`) in raw mode,
 * and shows each read on its screen (`got <n>: <printable bytes>`).
 */
export function recorder(file: string): string[] {
  const script = [
    "const fs = require('node:fs');",
    'process.stdin.setRawMode(true);',
    "process.stdout.write('RECORDER-READY\\r\\n');",
    "process.stdin.on('data', (d) => { fs.appendFileSync(process.argv[1], d.toString('hex') + '\\n');",
    // What it read, printable bytes only, on its screen too: for capture-pane.
    "  process.stdout.write('got ' + d.length + ': ' + d.toString('latin1').replace(/[^ -~]/g, '.') + '\\r\\n'); });",
  ].join('\n');
  // Not ending in `;`: tmux takes an argument ending in `;` for its command separator.
  return [process.execPath, '-e', `${script}\n`, file];
}

/** What the recorder's pane has read so far (latin1: one char a byte). */
export function recorded(file: string): string {
  try {
    return Buffer.from(readFileSync(file, 'utf8').replace(/\n/g, ''), 'hex').toString('latin1');
  } catch {
    return '';
  }
}

/** Type a marker straight into the pane (tmux itself), and wait for the recorder to see it. */
export async function marker(tmux: Tmux, target: string, file: string, text: string): Promise<void> {
  await tmux.must(['send-keys', '-t', `=${target}:`, '-l', text], 'send-keys');
  await eventually(() => recorded(file).includes(text) || undefined);
}
