/**
 * The console's defences at the HTTP level, on a real listener with real signed login links: the
 * Host allow-list (DNS rebinding), the login link (replayed, expired, forged, malformed), the
 * cookie's attributes, the security headers on every answer, the Origin and ticket checks of POSTs
 * and WebSocket upgrades, and a thousand refused upgrades leaving nothing behind.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mintLoginCode } from '../../src/console/auth.js';
import { CONSOLE_CSP } from '../../src/console/http.js';
import { WS_PROTOCOL } from '../../src/console/protocol.js';
import {
  http,
  logIn,
  type Rig,
  SESSION,
  startRig,
  TMUX_SESSION,
  TOKEN,
  ticketOf,
  until,
  wsAttempt,
} from './server-rig.js';

let rig: Rig;
afterEach(async () => {
  await rig?.close();
});

const cookie = (sid: string) => ({ cookie: `loop_console=${sid}` });

describe('every answer', () => {
  it('carries the CSP, no-store, nosniff, no-referrer and the frame headers', async () => {
    rig = await startRig();
    const { sid } = await logIn(rig);
    const answers = [
      await http(rig, '/healthz'),
      await http(rig, '/nowhere'),
      await http(rig, '/healthz', { headers: { host: 'evil.example' } }),
      await http(rig, '/assets/app.js'),
      await http(rig, '/login/v1.bad'),
      await http(rig, '/sessions'),
      await http(rig, '/sessions', { headers: cookie(sid) }),
      await http(rig, '/api/sessions'),
      await http(rig, '/api/sessions', { headers: cookie(sid) }),
      await http(rig, `/api/sessions/${SESSION}/resume`, { method: 'POST', headers: cookie(sid) }),
    ];
    for (const a of answers) {
      expect(a.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(a.headers['cache-control']).toBe('no-store');
      expect(a.headers['x-content-type-options']).toBe('nosniff');
      expect(a.headers['referrer-policy']).toBe('no-referrer');
      expect(a.headers['x-frame-options']).toBe('DENY');
      expect(a.headers['cross-origin-opener-policy']).toBe('same-origin');
      expect(a.headers['cross-origin-resource-policy']).toBe('same-origin');
    }
    expect(CONSOLE_CSP).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
  });
});

describe('the Host allow-list', () => {
  it('answers the loopback names of its port, and refuses any other Host (DNS rebinding)', async () => {
    rig = await startRig();
    const { sid } = await logIn(rig);
    for (const host of [
      `127.0.0.1:${rig.port}`,
      `localhost:${rig.port}`,
      `[::1]:${rig.port}`,
      `LOCALHOST:${rig.port}`,
    ]) {
      expect((await http(rig, '/healthz', { headers: { host } })).status).toBe(200);
    }
    for (const host of [
      `evil.example:${rig.port}`,
      'evil.example',
      `127.0.0.1:${rig.port + 1}`,
      '127.0.0.1',
    ]) {
      expect((await http(rig, '/healthz', { headers: { host } })).status).toBe(421);
      expect((await http(rig, '/sessions', { headers: { host, ...cookie(sid) } })).status).toBe(421);
      expect(
        (await http(rig, '/api/sessions', { headers: { host, authorization: `Bearer ${TOKEN}` } })).status,
      ).toBe(421);
    }
    // A login link sent to a rebinding host is refused before it is looked at: still usable.
    const { code } = mintLoginCode(TOKEN, 'ann');
    expect(
      (await http(rig, `/login/${code}`, { headers: { host: `evil.example:${rig.port}` } })).status,
    ).toBe(421);
    expect((await http(rig, `/login/${code}`)).status).toBe(303);
  });

  it('answers publicOrigin and allowedHosts when configured', async () => {
    rig = await startRig({ publicOrigin: 'https://loop.example.org', allowedHosts: ['Proxy.Internal:8443'] });
    expect((await http(rig, '/healthz', { headers: { host: 'loop.example.org' } })).status).toBe(200);
    expect((await http(rig, '/healthz', { headers: { host: 'proxy.internal:8443' } })).status).toBe(200);
    expect((await http(rig, '/healthz', { headers: { host: 'loop.example.org.evil' } })).status).toBe(421);
  });
});

describe('the login link', () => {
  it('is exchanged once for an HttpOnly, SameSite=Strict cookie, redirecting to a clean URL', async () => {
    rig = await startRig();
    const { code } = mintLoginCode(TOKEN, 'ann@box');
    const first = await http(rig, `/login/${code}`);
    expect(first.status).toBe(303);
    expect(first.headers.location).toBe('/sessions');
    const set = String(first.headers['set-cookie']);
    expect(set).toMatch(/^loop_console=[A-Za-z0-9_-]{43}; /);
    expect(set).toContain('HttpOnly');
    expect(set).toContain('SameSite=Strict');
    expect(set).toContain('Path=/');
    expect(set).not.toContain('Secure');
    const replay = await http(rig, `/login/${code}`);
    expect(replay.status).toBe(403);
    expect(replay.body).toContain('the-loop console');
    expect(replay.headers['set-cookie']).toBeUndefined();
    // The code is never written to the log.
    const log = rig.logLines.join('\n');
    expect(log).not.toContain(code);
    expect(log).not.toContain(code.split('.')[4] as string);
    expect(log).toContain('/login/…');
  });

  it('refuses expired, forged and malformed links with 403', async () => {
    rig = await startRig();
    const expired = mintLoginCode(TOKEN, 'ann', Date.now() - 120_000).code;
    const future = mintLoginCode(TOKEN, 'ann', Date.now() + 3_600_000).code;
    const otherKey = mintLoginCode(`${TOKEN}x`, 'ann').code;
    const good = mintLoginCode(TOKEN, 'ann').code.split('.');
    const asMallory = [...good.slice(0, 3), Buffer.from('mallory').toString('base64url'), good[4]].join('.');
    const bad = [
      expired,
      future,
      otherKey,
      asMallory,
      'v1',
      'v1.1.2.3.4',
      'v2.1.2.3.4',
      '%00',
      'x'.repeat(700),
      '.....',
    ];
    for (const code of bad) {
      const answer = await http(rig, `/login/${encodeURI(code)}`);
      expect(answer.status, code).toBe(403);
      expect(answer.headers['set-cookie']).toBeUndefined();
    }
    expect(rig.server.auth.counts().logins).toBe(0);
  });

  it('sets Secure on the cookie when the console is reached over https', async () => {
    rig = await startRig({ publicOrigin: 'https://loop.example.org' });
    const { code } = mintLoginCode(TOKEN, 'ann');
    const answer = await http(rig, `/login/${code}`, { headers: { host: 'loop.example.org' } });
    expect(answer.status).toBe(303);
    expect(String(answer.headers['set-cookie'])).toMatch(/; Secure/);
  });
});

describe('pages and the API', () => {
  it('answers pages only to a login (401 page otherwise), filling in the ticket', async () => {
    rig = await startRig();
    expect((await http(rig, '/sessions')).status).toBe(401);
    expect((await http(rig, '/sessions', { headers: cookie('made-up') })).status).toBe(401);
    expect((await http(rig, '/sessions', { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(
      401,
    );
    const { sid } = await logIn(rig);
    const page = await http(rig, `/sessions/${SESSION}`, { headers: cookie(sid) });
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toMatch(
      /<meta name="loop-ticket" content="[0-9a-f]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}">/,
    );
    expect((await http(rig, '/')).headers.location).toBe('/sessions');
  });

  it('serves only the assets listed at start, with their content types', async () => {
    rig = await startRig();
    const js = await http(rig, '/assets/app.js');
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect((await http(rig, '/assets/app.css')).headers['content-type']).toBe('text/css; charset=utf-8');
    for (const path of [
      '/assets/../secret.txt',
      '/assets/..%2fsecret.txt',
      '/assets/%2e%2e/secret.txt',
      '/assets/',
      '/secret.txt',
      '/assets/nope.js',
      '/sessions.html',
    ]) {
      const answer = await http(rig, path);
      expect(answer.status, path).toBe(404);
      expect(answer.body).not.toContain('outside the assets');
    }
  });

  it('answers /api to a login or the Bearer token, 401 JSON otherwise', async () => {
    rig = await startRig();
    const none = await http(rig, '/api/sessions');
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body)).toMatchObject({ error: 'not logged in' });
    const { sid } = await logIn(rig);
    expect((await http(rig, '/api/sessions', { headers: cookie(sid) })).status).toBe(200);
    const bearer = await http(rig, '/api/sessions', { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(JSON.parse(bearer.body)).toMatchObject([{ id: SESSION }]);
    // A wrong token never falls back to the cookie sent with it.
    const wrong = { authorization: `Bearer ${TOKEN.slice(0, -1)}A`, ...cookie(sid) };
    expect((await http(rig, '/api/sessions', { headers: wrong })).status).toBe(401);
    expect((await http(rig, '/api/sessions', { headers: { authorization: `Basic ${TOKEN}` } })).status).toBe(
      401,
    );
  });
});

describe('state-changing requests', () => {
  it('need the exact Origin and a ticket of this very login', async () => {
    rig = await startRig();
    const ann = await logIn(rig, 'ann');
    const bob = await logIn(rig, 'bob');
    const ticket = await ticketOf(rig, ann.sid);
    const bobTicket = await ticketOf(rig, bob.sid);
    const [publicId, nonce] = ticket.split('.');
    const path = `/api/sessions/${SESSION}/takeover`;
    const attempts: Array<[string, Record<string, string>]> = [
      ['no Origin', { 'x-loop-ticket': ticket }],
      ['foreign Origin', { origin: 'http://evil.example', 'x-loop-ticket': ticket }],
      ['null Origin', { origin: 'null', 'x-loop-ticket': ticket }],
      ['Origin of another port', { origin: `http://127.0.0.1:${rig.port + 1}`, 'x-loop-ticket': ticket }],
      ['Origin with a path', { origin: `${rig.origin}/`, 'x-loop-ticket': ticket }],
      ['no ticket', { origin: rig.origin }],
      ['forged ticket', { origin: rig.origin, 'x-loop-ticket': `${publicId}.${nonce}.${'A'.repeat(43)}` }],
      ['ticket of another login', { origin: rig.origin, 'x-loop-ticket': bobTicket }],
    ];
    for (const [what, headers] of attempts) {
      const answer = await http(rig, path, { method: 'POST', headers: { ...cookie(ann.sid), ...headers } });
      expect(answer.status, what).toBe(403);
    }
    expect(rig.calls.takeOver).toEqual([]);
    const ok = await http(rig, path, {
      method: 'POST',
      headers: { ...cookie(ann.sid), origin: rig.origin, 'x-loop-ticket': ticket },
    });
    expect(ok.status).toBe(200);
    expect(rig.calls.takeOver).toEqual([{ id: SESSION, by: 'ann', principal: publicId }]);
    expect(rig.calls.setTakeover).toMatchObject([
      { sessionId: SESSION, takeover: { by: 'ann', principal: publicId } },
    ]);
  });

  it('with the Bearer token need neither Origin nor ticket; without auth are 401', async () => {
    rig = await startRig();
    const path = `/api/sessions/${SESSION}/handback`;
    expect((await http(rig, path, { method: 'POST' })).status).toBe(401);
    const ok = await http(rig, path, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(rig.calls.handBack).toEqual([SESSION]);
    expect(rig.calls.notified).toBe(1);
  });
});

describe('WebSocket upgrades', () => {
  it('are refused without a login, with a bad Origin or ticket, or for another Host', async () => {
    rig = await startRig();
    const ann = await logIn(rig, 'ann');
    const bob = await logIn(rig, 'bob');
    const ticket = await ticketOf(rig, ann.sid);
    const bobTicket = await ticketOf(rig, bob.sid);
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
    const ticket = await ticketOf(rig, ann.sid);
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
    const ticket = await ticketOf(rig, ann.sid);
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
