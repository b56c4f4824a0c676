/**
 * WebSocket upgrades at the HTTP level, on a real listener: a browser login's upgrade needs the
 * exact Origin and a ticket made with its login's key (as the sub-protocol `ticket.<t>`); refused
 * attempts are answered before `ws` sees them and a thousand of them hold nothing; a terminal socket
 * goes to the hub with the login's public id; oversized frames close the socket.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WS_PROTOCOL } from '../../src/console/protocol.js';
import {
  http,
  logIn,
  makeTicket,
  type Rig,
  SESSION,
  startRig,
  TMUX_SESSION,
  until,
  wsAttempt,
} from './server-rig.js';

let rig: Rig;
afterEach(async () => {
  await rig?.close();
});

const cookie = (sid: string) => ({ cookie: `loop_console=${sid}` });

describe('WebSocket upgrades', () => {
  it('are refused without a login, with a bad Origin or ticket, or for another Host', async () => {
    rig = await startRig();
    const ann = await logIn(rig, 'ann');
    const bob = await logIn(rig, 'bob');
    const ticket = makeTicket(ann);
    const bobTicket = makeTicket(bob);
    const good = {
      protocols: [WS_PROTOCOL, `ticket.${ticket}`],
      headers: cookie(ann.sid),
      origin: rig.origin,
    };
    const attempts: Array<[string, Parameters<typeof wsAttempt>[2], number]> = [
      ['no cookie', { ...good, headers: {} }, 401],
      ['unknown cookie', { ...good, headers: cookie('x'.repeat(43)) }, 401],
      ['no Origin', { protocols: good.protocols, headers: good.headers }, 403],
      ['foreign Origin', { ...good, origin: 'http://evil.example' }, 403],
      ['null Origin', { ...good, origin: 'null' }, 403],
      ['no ticket', { ...good, protocols: [WS_PROTOCOL] }, 403],
      ['forged ticket', { ...good, protocols: [WS_PROTOCOL, `ticket.${ticket.slice(0, -2)}AA`] }, 403],
      ['ticket of another login', { ...good, protocols: [WS_PROTOCOL, `ticket.${bobTicket}`] }, 403],
      [
        'ticket made with another key',
        {
          ...good,
          protocols: [WS_PROTOCOL, `ticket.${makeTicket({ publicId: ann.publicId, key: bob.key })}`],
        },
        403,
      ],
      ['no protocol', { ...good, protocols: [`ticket.${ticket}`] }, 400],
      ['rebinding Host', { ...good, headers: { ...good.headers, host: `evil.example:${rig.port}` } }, 421],
    ];
    for (const [what, options, status] of attempts) {
      const result = await wsAttempt(rig, '/ws/live', options);
      expect('status' in result ? result.status : 'opened', what).toBe(status);
    }
    expect((await wsAttempt(rig, '/ws/elsewhere', good)) as { status: number }).toEqual({ status: 404 });
    const opened = await wsAttempt(rig, '/ws/live', good);
    if (!('ws' in opened)) throw new Error(`refused: ${opened.status}`);
    expect(opened.protocol).toBe(WS_PROTOCOL);
    await until('the sessions message', () => opened.messages.length > 0);
    expect(JSON.parse(opened.messages[0] as string)).toMatchObject({
      t: 'sessions',
      rows: [{ id: SESSION }],
    });
    opened.ws.close();
  });

  it('hands a terminal socket to the hub with the login as principal; no terminal: 4404', async () => {
    rig = await startRig();
    const ann = await logIn(rig, 'ann');
    const ticket = makeTicket(ann);
    const options = {
      protocols: [WS_PROTOCOL, `ticket.${ticket}`],
      headers: cookie(ann.sid),
      origin: rig.origin,
    };
    const opened = await wsAttempt(rig, `/ws/terminal/${TMUX_SESSION}`, options);
    expect('ws' in opened).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(rig.calls.attached).toEqual([
      { sessionId: TMUX_SESSION, target: 'loop-x', principal: ticket.split('.')[0] },
    ]);
    const none = await wsAttempt(rig, `/ws/terminal/${SESSION}`, options);
    if (!('ws' in none)) throw new Error('refused');
    const code = await new Promise<number>((resolve) => none.ws.once('close', (c) => resolve(c)));
    expect(code).toBe(4404);
    expect(await wsAttempt(rig, '/ws/terminal/..%2f..%2fetc', options)).toEqual({ status: 404 });
  });

  it('refuse a frame over 64 KiB (1009)', async () => {
    rig = await startRig();
    const ann = await logIn(rig);
    const ticket = makeTicket(ann);
    const opened = await wsAttempt(rig, '/ws/live', {
      protocols: [WS_PROTOCOL, `ticket.${ticket}`],
      headers: cookie(ann.sid),
      origin: rig.origin,
    });
    if (!('ws' in opened)) throw new Error('refused');
    const closed = new Promise<number>((resolve) => opened.ws.once('close', (c) => resolve(c)));
    opened.ws.send(Buffer.alloc(64 * 1024 + 1, 0x41));
    expect(await closed).toBe(1009);
  });

  it('a thousand attempts without a ticket are all refused and hold nothing afterwards', async () => {
    rig = await startRig();
    const ann = await logIn(rig);
    const options = { protocols: [WS_PROTOCOL], headers: cookie(ann.sid), origin: rig.origin };
    const statuses: number[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const results = await Promise.all(
        Array.from({ length: 100 }, () => wsAttempt(rig, '/ws/live', options)),
      );
      for (const r of results) statuses.push('status' in r ? r.status : 0);
    }
    expect(statuses.filter((s) => s === 403)).toHaveLength(1000);
    await new Promise((r) => setTimeout(r, 200));
    const stats = rig.server.stats();
    expect(stats.open).toBeLessThanOrEqual(1);
    expect(stats.live).toBe(0);
    expect(rig.server.auth.counts().logins).toBe(1);
    expect((await http(rig, '/healthz')).status).toBe(200);
  });
});
