/**
 * The console's defences at the HTTP level, on a real listener with real signed login links: the
 * Host allow-list (DNS rebinding), the login link (replayed, expired, forged, malformed, minted
 * before the daemon started), the cookie's attributes and the login page's key, the security
 * headers on every answer, the ticket on every /api request and the Origin on POSTs, and the
 * reviewer's attack: the cookie alone, received by another port's server, grants nothing but
 * data-free pages. (WebSocket upgrades: server-upgrades.test.ts.)
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mintLoginCode } from '../../src/console/auth.js';
import { CONSOLE_CSP } from '../../src/console/http.js';
import { LOGIN_ID_META, LOGIN_KEY_META, WS_PROTOCOL } from '../../src/console/protocol.js';
import {
  asPage,
  http,
  logIn,
  makeTicket,
  metaOf,
  PAGE,
  type Rig,
  ROW,
  SESSION,
  startRig,
  TMUX_SESSION,
  TOKEN,
  writeStatic,
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
    expect((await http(rig, `/login/${code}`)).status).toBe(200);
  });

  it('answers publicOrigin and allowedHosts when configured', async () => {
    rig = await startRig({ publicOrigin: 'https://loop.example.org', allowedHosts: ['Proxy.Internal:8443'] });
    expect((await http(rig, '/healthz', { headers: { host: 'loop.example.org' } })).status).toBe(200);
    expect((await http(rig, '/healthz', { headers: { host: 'proxy.internal:8443' } })).status).toBe(200);
    expect((await http(rig, '/healthz', { headers: { host: 'loop.example.org.evil' } })).status).toBe(421);
  });
});

describe('the login link', () => {
  it('is exchanged once for an HttpOnly, SameSite=Strict cookie and a login page holding the key', async () => {
    rig = await startRig();
    const { code } = mintLoginCode(TOKEN, 'ann@box');
    const first = await http(rig, `/login/${code}`);
    expect(first.status).toBe(200);
    expect(first.headers.location).toBeUndefined();
    expect(first.headers['cache-control']).toBe('no-store');
    const key = metaOf(first.body, LOGIN_KEY_META);
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(metaOf(first.body, LOGIN_ID_META)).toMatch(/^[0-9a-f]{16}$/);
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
    expect(log).not.toContain(key);
    expect(log).toContain('/login/…');
  });

  it('is not used up by a HEAD (a link previewer): 405, and the GET after it logs in', async () => {
    rig = await startRig();
    const { code } = mintLoginCode(TOKEN, 'ann');
    const head = await http(rig, `/login/${code}`, { method: 'HEAD' });
    expect(head.status).toBe(405);
    expect(head.headers['set-cookie']).toBeUndefined();
    expect((await http(rig, `/login/${code}`)).status).toBe(200);
  });

  it('refuses a link minted before the daemon started (used nonces are only in memory)', async () => {
    // Minted 10 s ago, so still unexpired: as if used just before a restart, and replayed after it.
    const before = mintLoginCode(TOKEN, 'ann', Date.now() - 10_000).code;
    rig = await startRig();
    const answer = await http(rig, `/login/${before}`);
    expect(answer.status).toBe(403);
    expect(answer.body).toContain('before the daemon (re)started');
    expect(answer.headers['set-cookie']).toBeUndefined();
    expect((await http(rig, `/login/${mintLoginCode(TOKEN, 'ann').code}`)).status).toBe(200);
  });

  it('is not used up by a console whose login page is not built (503)', async () => {
    const dir = writeStatic();
    rmSync(join(dir, 'login.html'));
    rig = await startRig({ staticDir: dir });
    const { code } = mintLoginCode(TOKEN, 'ann');
    expect((await http(rig, `/login/${code}`)).status).toBe(503);
    expect(rig.server.auth.counts()).toEqual({ logins: 0, usedNonces: 0 });
    rmSync(dir, { recursive: true, force: true });
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
    expect(answer.status).toBe(200);
    expect(String(answer.headers['set-cookie'])).toMatch(/; Secure/);
  });
});

describe('pages and the API', () => {
  it('answers pages only to a login (401 page otherwise), as built: no ticket, key or data', async () => {
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
    expect(page.body).toBe(PAGE('session'));
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

  it('answers /api to a login with its ticket or the Bearer token, 401 JSON otherwise', async () => {
    rig = await startRig();
    const none = await http(rig, '/api/sessions');
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body)).toMatchObject({ error: 'not logged in' });
    const ann = await logIn(rig);
    const { sid } = ann;
    expect((await http(rig, '/api/sessions', { headers: asPage(ann) })).status).toBe(200);
    expect((await http(rig, '/api/sessions', { headers: cookie(sid) })).status).toBe(403);
    // Another port of this host can plant a cookie of the same name (sent first: a longer Path):
    // the real one still counts, so a planted one cannot log the person out.
    const planted = { ...asPage(ann), cookie: `loop_console=planted-by-another-port; loop_console=${sid}` };
    expect((await http(rig, '/api/sessions', { headers: planted })).status).toBe(200);
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
    const ticket = makeTicket(ann);
    const bobTicket = makeTicket(bob);
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
      [
        'ticket made with another key',
        { origin: rig.origin, 'x-loop-ticket': makeTicket({ publicId: ann.publicId, key: bob.key }) },
      ],
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

describe('the cookie alone (as another port of the host receives it)', () => {
  // Browsers send a host's cookies to all its ports (a site has no port): another local user's server
  // on 127.0.0.1:<other port>, visited once, has the cookie. From a process of theirs they can send
  // any Origin and Host. All they may get is the data-free page templates.
  it('reads no data, changes nothing, opens no socket; the page it gets holds no ticket or key', async () => {
    rig = await startRig();
    const ann = await logIn(rig);
    const forged = { ...cookie(ann.sid), origin: rig.origin };
    for (const path of ['/api/sessions', `/api/sessions/${SESSION}`, '/api/usage', '/api/acts']) {
      const answer = await http(rig, path, { headers: forged });
      expect(answer.status, path).toBe(403);
      expect(JSON.parse(answer.body).error, path).toMatch(/ticket/);
      expect(answer.body).not.toContain(ROW.workItem);
    }
    const pages = [
      ['/sessions', 'sessions'],
      [`/sessions/${SESSION}`, 'session'],
      ['/usage', 'usage'],
      ['/acts', 'acts'],
    ];
    for (const [path, name] of pages as Array<[string, string]>) {
      const page = await http(rig, path, { headers: forged });
      expect(page.status, path).toBe(200);
      expect(page.body).toBe(PAGE(name));
      expect(page.body).not.toContain(ann.key);
      expect(page.body).not.toContain(ann.publicId);
    }
    const takeover = `/api/sessions/${SESSION}/takeover`;
    const wrongKey = makeTicket({ publicId: ann.publicId, key: Buffer.alloc(32, 7).toString('base64url') });
    for (const ticket of [undefined, wrongKey, `${ann.publicId}.x.y`]) {
      const headers = {
        ...forged,
        'content-type': 'application/json',
        ...(ticket ? { 'x-loop-ticket': ticket } : {}),
      };
      expect((await http(rig, takeover, { method: 'POST', headers, body: '{}' })).status, ticket).toBe(403);
      expect((await http(rig, '/api/sessions', { headers })).status, ticket).toBe(403);
      for (const path of ['/ws/live', `/ws/terminal/${TMUX_SESSION}`]) {
        const protocols = [WS_PROTOCOL, ...(ticket ? [`ticket.${ticket}`] : [])];
        const attempt = await wsAttempt(rig, path, {
          protocols,
          headers: cookie(ann.sid),
          origin: rig.origin,
        });
        expect('status' in attempt ? attempt.status : 'opened', `${path} ${ticket}`).toBe(403);
      }
    }
    expect(rig.calls.takeOver).toEqual([]);
    expect(rig.calls.attached).toEqual([]);
    // With the key (what only the console's own origin can read, from localStorage): it works.
    expect((await http(rig, '/api/sessions', { headers: asPage(ann) })).status).toBe(200);
    const ok = await http(rig, takeover, { method: 'POST', headers: { ...asPage(ann), origin: rig.origin } });
    expect(ok.status).toBe(200);
    const opened = await wsAttempt(rig, '/ws/live', {
      protocols: [WS_PROTOCOL, `ticket.${makeTicket(ann)}`],
      headers: cookie(ann.sid),
      origin: rig.origin,
    });
    expect('ws' in opened).toBe(true);
    if ('ws' in opened) opened.ws.close();
  });
});
