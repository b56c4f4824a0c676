/**
 * The console's sockets against its listener limits, on a real listener: accepted WebSockets (a
 * browser login's live socket and terminal socket) outlive idle connections flooding the listener
 * past its cap (they left HTTP's count; the idle ones are shed), live sockets past their own cap
 * are closed 1013 with a reason, and an upgrade refused carries every console security header.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SECURITY_HEADERS } from '../../src/console/http.js';
import { type SessionRow, WS_PROTOCOL } from '../../src/console/protocol.js';
import { CONSOLE_LIMITS } from '../../src/console/server.js';
import {
  type Calls,
  logIn,
  makeTicket,
  type Rig,
  ROW,
  recordingDeps,
  startRig,
  TMUX_SESSION,
  TOKEN,
  until,
  wsAttempt,
} from './server-rig.js';

let rig: Rig;
const idle: Socket[] = [];
afterEach(async () => {
  for (const s of idle.splice(0)) s.destroy();
  await rig?.close();
});

const newCalls = (): Calls => ({
  resume: [],
  takeOver: [],
  handBack: [],
  notified: 0,
  attached: [],
  setTakeover: [],
});

/** A browser login's socket: logged in through a link, its cookie, the Origin and a page's ticket. */
async function browserSocket(r: Rig, path: string) {
  const login = await logIn(r);
  const opened = await wsAttempt(r, path, {
    protocols: [WS_PROTOCOL, `ticket.${makeTicket(login)}`],
    headers: { cookie: `loop_console=${login.sid}` },
    origin: r.origin,
  });
  if (!('ws' in opened)) throw new Error(`${path} refused: ${opened.status}`);
  return opened;
}

const bearerLive = async (r: Rig) => {
  const opened = await wsAttempt(r, '/ws/live', {
    protocols: [WS_PROTOCOL],
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  if (!('ws' in opened)) throw new Error(`refused ${opened.status}`);
  return opened;
};

describe('accepted WebSockets and the connection cap', () => {
  it('a live socket and a terminal socket outlive 600 idle connections; the idle ones are shed', async () => {
    let rows: SessionRow[] = [ROW];
    rig = await startRig({ deps: recordingDeps(newCalls(), () => rows) });
    const live = await browserSocket(rig, '/ws/live');
    const terminal = await browserSocket(rig, `/ws/terminal/${TMUX_SESSION}`);
    await until('the first list', () => live.messages.length === 1);
    await until('the terminal with the hub', () => rig.calls.attached.length === 1);
    const closes: number[] = [];
    for (const ws of [live.ws, terminal.ws]) ws.on('close', (code) => closes.push(code));
    expect(rig.server.stats()).toMatchObject({ open: 0, upgraded: 2 });

    const cap = CONSOLE_LIMITS.maxConnections ?? 0;
    for (let i = 0; i < 600; i++) {
      const socket = connect(rig.port, '127.0.0.1');
      socket.on('error', () => {});
      idle.push(socket);
    }
    await until('the flood shed down to the cap', () => rig.server.stats().shedWaiting === 600 - cap, 20_000);
    expect(rig.server.stats()).toMatchObject({ open: cap, upgraded: 2, refusedConnections: 0 });

    rows = [{ ...ROW, status: 'running' }];
    await until('the changed list', () => live.messages.length === 2);
    expect(JSON.parse(live.messages[1] as string)).toMatchObject({
      t: 'sessions',
      rows: [{ status: 'running' }],
    });
    expect(closes).toEqual([]);
    expect(rig.server.stats()).toMatchObject({ live: 1, upgraded: 2 });
    live.ws.close();
    terminal.ws.close();
    await until('the sockets to be forgotten', () => rig.server.stats().upgraded === 0);
  }, 30_000);

  it('past their own cap live sockets are closed 1013 with the reason; a place freed is taken again', async () => {
    rig = await startRig({ live: { rowsMs: 50, eventsMs: 50, maxClients: 2 } });
    const first = await bearerLive(rig);
    await bearerLive(rig);
    const third = await bearerLive(rig);
    const [code, reason] = await new Promise<[number, string]>((resolve) =>
      third.ws.once('close', (c, r) => resolve([c, String(r)])),
    );
    expect(code).toBe(1013);
    expect(reason).toMatch(/too many live pages/);
    expect(rig.server.stats()).toMatchObject({ live: 2, liveRefused: 1 });
    first.ws.close();
    await until('a place freed', () => rig.server.stats().live === 1);
    const again = await bearerLive(rig);
    await until('the list on the new socket', () => again.messages.length === 1);
    expect(rig.server.stats()).toMatchObject({ live: 2, liveRefused: 1 });
  });
});

/** A raw upgrade attempt: the refusal's status and headers. */
function upgradeAnswer(r: Rig, path: string, headers: Record<string, string>) {
  return new Promise<{ status: number; headers: Record<string, unknown> }>((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: r.port,
      path,
      agent: false,
      headers: {
        host: r.host,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        ...headers,
      },
    });
    req.on('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
    });
    req.on('upgrade', () => reject(new Error('upgraded')));
    req.on('error', reject);
    req.end();
  });
}

describe('an upgrade refused', () => {
  it('carries the security headers of every console answer', async () => {
    rig = await startRig();
    const answers = [
      await upgradeAnswer(rig, '/ws/live', { host: 'evil.example' }),
      await upgradeAnswer(rig, '/ws/elsewhere', {}),
      await upgradeAnswer(rig, '/ws/live', {}),
      await upgradeAnswer(rig, '/ws/live', { authorization: `Bearer ${TOKEN}` }),
      await upgradeAnswer(rig, '/ws/live', { cookie: 'loop_console=nobody' }),
    ];
    expect(answers.map((a) => a.status)).toEqual([421, 404, 401, 400, 401]);
    for (const a of answers) {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(a.headers[name], name).toBe(value);
      expect(a.headers.connection).toBe('close');
    }
    expect(rig.server.stats()).toMatchObject({ upgraded: 0, live: 0 });
  });
});
