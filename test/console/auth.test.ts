/**
 * The console's credentials (src/console/auth.ts): the token file, login codes (signed, fresh,
 * single-use, of this daemon run), logins and their expiry, tickets made with one login's key, the
 * Bearer check, the Host and Origin allow-lists, and the login page's meta tags.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  allowedHostValues,
  allowedOriginValues,
  ConsoleAuth,
  consoleOrigin,
  loadOrCreateToken,
  mintLoginCode,
  readToken,
  sameSecret,
} from '../../src/console/auth.js';
import { renderLogin } from '../../src/console/pages.js';
import { LOGIN_ID_META, LOGIN_KEY_META } from '../../src/console/protocol.js';
import { makeTicket } from './server-rig.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'the-loop-auth-'));
  dirs.push(d);
  return d;
};

const TOKEN = 'x'.repeat(43);

describe('the token file', () => {
  it('is created 0600 once, and read back unchanged', () => {
    const dir = tempDir();
    const token = loadOrCreateToken(dir);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(join(dir, 'console-token')).mode & 0o777).toBe(0o600);
    expect(loadOrCreateToken(dir)).toBe(token);
    expect(readToken(dir)).toBe(token);
  });

  it('is refused when others can read it, missing, or not a token', () => {
    const dir = tempDir();
    expect(() => readToken(dir)).toThrow(/no console token/);
    loadOrCreateToken(dir);
    chmodSync(join(dir, 'console-token'), 0o644);
    expect(() => readToken(dir)).toThrow(/readable by others/);
    writeFileSync(join(dir, 'console-token'), 'short\n', { mode: 0o600 });
    chmodSync(join(dir, 'console-token'), 0o600);
    expect(() => readToken(dir)).toThrow(/does not hold a console token/);
    expect(readFileSync(join(dir, 'console-token'), 'utf8')).toBe('short\n');
  });
});

describe('login codes', () => {
  it('are accepted once, fresh and signed with the token; who comes back whole', () => {
    const auth = new ConsoleAuth({ token: TOKEN, sessionHours: 1 });
    const { code, expiresAt } = mintLoginCode(TOKEN, 'Zoë@box');
    expect(Date.parse(expiresAt) - Date.now()).toBeLessThanOrEqual(60_000);
    expect(auth.checkLoginCode(code)).toEqual({ ok: true, who: 'Zoë@box' });
    expect(auth.checkLoginCode(code)).toEqual({ ok: false, why: 'used' });
  });

  it('are refused expired, too far ahead, forged or malformed', () => {
    let now = Date.now();
    const auth = new ConsoleAuth({ token: TOKEN, sessionHours: 1, now: () => now });
    const later = mintLoginCode(TOKEN, 'ann', now).code;
    now += 70_000;
    expect(auth.checkLoginCode(later)).toEqual({ ok: false, why: 'expired' });
    expect(auth.checkLoginCode(mintLoginCode(TOKEN, 'ann', now + 600_000).code)).toEqual({
      ok: false,
      why: 'expired',
    });
    expect(auth.checkLoginCode(mintLoginCode(`${TOKEN}y`, 'ann', now).code)).toEqual({
      ok: false,
      why: 'forged',
    });
    const parts = mintLoginCode(TOKEN, 'ann', now).code.split('.');
    parts[3] = Buffer.from('root').toString('base64url');
    expect(auth.checkLoginCode(parts.join('.'))).toEqual({ ok: false, why: 'forged' });
    for (const code of [
      '',
      'v1',
      'v1.a.b.c.d',
      'v2.1.a.b.c',
      'v1.1.a+b.c.d',
      `v1.1.a.b.${'c'.repeat(700)}`,
    ]) {
      expect(auth.checkLoginCode(code)).toEqual({ ok: false, why: 'malformed' });
    }
    expect(auth.counts().usedNonces).toBe(0);
  });

  it('are refused when minted before this daemon run started (a replay across a restart)', () => {
    let now = Date.now();
    const early = mintLoginCode(TOKEN, 'ann', now - 3_000).code;
    const justBefore = mintLoginCode(TOKEN, 'ann', now - 500).code;
    const auth = new ConsoleAuth({ token: TOKEN, sessionHours: 1, now: () => now });
    expect(auth.checkLoginCode(early)).toEqual({ ok: false, why: 'before-start' });
    // Within the skew: the mint time is rounded down to the second.
    expect(auth.checkLoginCode(justBefore).ok).toBe(true);
    now += 1000;
    expect(auth.checkLoginCode(mintLoginCode(TOKEN, 'ann', now).code).ok).toBe(true);
  });

  it('forget used nonces once expired', () => {
    let now = Date.now();
    const auth = new ConsoleAuth({ token: TOKEN, sessionHours: 1, now: () => now });
    for (let i = 0; i < 5; i++)
      expect(auth.checkLoginCode(mintLoginCode(TOKEN, 'a', now).code).ok).toBe(true);
    expect(auth.counts().usedNonces).toBe(5);
    now += 120_000;
    auth.checkLoginCode(mintLoginCode(TOKEN, 'a', now).code);
    expect(auth.counts().usedNonces).toBe(1);
  });
});

describe('logins and tickets', () => {
  it('a login lives sessionHours; only tickets made with its own key pass', () => {
    let now = Date.now();
    const auth = new ConsoleAuth({ token: TOKEN, sessionHours: 1, now: () => now });
    const ann = auth.createLogin('ann');
    const bob = auth.createLogin('bob');
    expect(ann.sid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(ann.key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(ann.key).not.toBe(bob.key);
    expect(ann.login.publicId).toMatch(/^[0-9a-f]{16}$/);
    // The key is not on the login object (nothing that logs or serialises a login carries it).
    expect(JSON.stringify(ann.login)).not.toContain(ann.key);
    expect(auth.loginOf(ann.sid)).toEqual(ann.login);
    expect(auth.loginOf(`${ann.sid}x`)).toBeUndefined();
    expect(auth.loginOf(undefined)).toBeUndefined();
    const annOf = { publicId: ann.login.publicId, key: ann.key };
    const ticket = makeTicket(annOf);
    expect(auth.checkTicket(ticket, ann.login)).toBe(true);
    expect(auth.checkTicket(makeTicket(annOf), ann.login)).toBe(true);
    expect(auth.checkTicket(ticket, bob.login)).toBe(false);
    expect(auth.checkTicket(makeTicket({ publicId: bob.login.publicId, key: bob.key }), ann.login)).toBe(
      false,
    );
    // Ann's public id with another key, or Ann's key under Bob's id: refused.
    expect(auth.checkTicket(makeTicket({ publicId: ann.login.publicId, key: bob.key }), ann.login)).toBe(
      false,
    );
    const [, nonce, mac] = ticket.split('.');
    expect(auth.checkTicket(`${bob.login.publicId}.${nonce}.${mac}`, ann.login)).toBe(false);
    for (const bad of [undefined, '', 'a.b', `${ticket}.x`, 'x'.repeat(300), makeTicket(annOf, 'short')]) {
      expect(auth.checkTicket(bad, ann.login)).toBe(false);
    }
    now += 3_600_001;
    expect(auth.loginOf(ann.sid)).toBeUndefined();
  });

  it('a login of another daemon (a restart) is unknown, and its key opens nothing', () => {
    const one = new ConsoleAuth({ token: TOKEN, sessionHours: 1 });
    const two = new ConsoleAuth({ token: TOKEN, sessionHours: 1 });
    const ann = one.createLogin('ann');
    expect(two.loginOf(ann.sid)).toBeUndefined();
    expect(two.checkTicket(makeTicket({ publicId: ann.login.publicId, key: ann.key }), ann.login)).toBe(
      false,
    );
  });

  it('the Bearer token is checked whole', () => {
    const auth = new ConsoleAuth({ token: TOKEN, sessionHours: 1 });
    expect(auth.checkBearer(`Bearer ${TOKEN}`)).toBe(true);
    for (const bad of [
      undefined,
      TOKEN,
      `bearer ${TOKEN}`,
      `Bearer ${TOKEN}x`,
      `Bearer ${TOKEN.slice(1)}`,
      `Bearer  ${TOKEN}`,
    ]) {
      expect(auth.checkBearer(bad)).toBe(false);
    }
    expect(sameSecret('a', 'a')).toBe(true);
    expect(sameSecret('a', 'ab')).toBe(false);
  });
});

describe('allow-lists', () => {
  it('loopback: the three loopback names of the port, as Host and as http origins', () => {
    const bind = { host: '127.0.0.1', port: 7701 };
    expect([...allowedHostValues(bind)]).toEqual(['127.0.0.1:7701', 'localhost:7701', '[::1]:7701']);
    expect([...allowedOriginValues(bind)]).toEqual([
      'http://127.0.0.1:7701',
      'http://localhost:7701',
      'http://[::1]:7701',
    ]);
    expect(consoleOrigin(bind)).toBe('http://127.0.0.1:7701');
    expect(consoleOrigin({ host: '::1', port: 9 })).toBe('http://[::1]:9');
    expect(allowedHostValues({ host: '127.0.0.2', port: 9 }).has('127.0.0.2:9')).toBe(true);
  });

  it('behind a proxy: publicOrigin and allowedHosts, no loopback name', () => {
    const bind = {
      host: '0.0.0.0',
      port: 7701,
      publicOrigin: 'https://loop.example.org',
      allowedHosts: ['A.example:8443'],
    };
    expect([...allowedHostValues(bind)]).toEqual(['loop.example.org', 'a.example:8443']);
    expect([...allowedOriginValues(bind)]).toEqual(['https://loop.example.org']);
    expect(consoleOrigin(bind)).toBe('https://loop.example.org');
  });
});

describe('the login page', () => {
  it('gets the key and public id in its meta tags, HTML-escaped', () => {
    const template = `<head><meta name="${LOGIN_KEY_META}" content=""><meta name="${LOGIN_ID_META}" content=""></head>`;
    const page = renderLogin(template, { key: '"><script>x</script>&', publicId: 'abc' });
    expect(page).toBe(
      `<head><meta name="${LOGIN_KEY_META}" content="&#34;&#62;&#60;script&#62;x&#60;/script&#62;&#38;">` +
        `<meta name="${LOGIN_ID_META}" content="abc"></head>`,
    );
  });
});
