import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isLoopbackHost } from '../config/console-schema.js';
import { LoopError } from '../core/errors.js';
import { ticketMessage } from './protocol.js';

/**
 * Who may use the console, and how a browser proves it (docs/console.md):
 * - the token: 32 random bytes in `<dataDir>/console-token` (0600). Whoever can read that file is
 *   the operator: the CLI signs login links with it, and API clients send it as a Bearer token;
 * - a login link: single-use, valid 60 s, HMAC-signed with the token, minted during this daemon run,
 *   exchanged for a cookie and a per-login key (the login page hands the key to the browser);
 * - a console login: the cookie's random id → who logged in, a public id, its key, an expiry;
 * - a per-page ticket: made by the browser, an HMAC of the public id and a nonce under the login's
 *   key, required on every /api request, WebSocket upgrade and POST of a browser login. The cookie
 *   alone is not enough: browsers send it to every port of the host (a site is scheme + host,
 *   without the port), so another local user's server on another port may receive it. The key is
 *   kept in the browser's localStorage, which is per origin (port included): only this console's
 *   own pages read it.
 */

export const TOKEN_FILE = 'console-token';
/** A login link lives a minute: long enough to click, short enough that a leaked one is stale. */
export const LOGIN_LIFETIME_S = 60;
/** The clocks of the CLI and the daemon are one machine's, but allow a little skew. */
const SKEW_S = 5;
/**
 * A link minted before this daemon run started is refused: used nonces live only in memory, so a link
 * used just before a restart could be replayed after it. Its mint time is `exp - LOGIN_LIFETIME_S`,
 * rounded down to the second, so a link minted in the same second as the start may look up to 1 s
 * older; 2 s covers that and leaves a replay window of 2 s before a restart.
 */
const START_SKEW_S = 2;
/** Used nonces remembered at most (each expires within a minute; only valid links add one). */
const MAX_USED_NONCES = 100_000;
/** Console logins at most; the oldest goes first. */
const MAX_LOGINS = 1000;
const B64URL = /^[A-Za-z0-9_-]+$/;

const hmac = (key: string | Buffer, text: string): Buffer => createHmac('sha256', key).update(text).digest();
const b64url = (bytes: Buffer): string => bytes.toString('base64url');

/** Equal in constant time (for equal lengths; a different length is not secret). */
export function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Equal strings in time independent of where they differ (both hashed first: lengths may differ). */
export function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}

/** The token, created (0600, never overwritten) on first use. Never logged, never in a URL. */
export function loadOrCreateToken(dataDir: string): string {
  const path = join(dataDir, TOKEN_FILE);
  try {
    // `wx`: a file already there (a token, or something planted) is never written through.
    writeFileSync(path, `${b64url(randomBytes(32))}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new LoopError('internal', `cannot create the console token in ${dataDir}`, { cause: error });
    }
  }
  return readToken(dataDir);
}

/** The token the running daemon uses (for the CLI), checked private. */
export function readToken(dataDir: string): string {
  const path = join(dataDir, TOKEN_FILE);
  let text: string;
  try {
    const mode = statSync(path).mode & 0o777;
    if (mode & 0o077) {
      throw new LoopError('config-invalid', `${path} is readable by others (mode ${mode.toString(8)})`, {
        hint: `Anyone who reads it can use the console: chmod 600 ${path}, or delete it (a new one is made at the next start).`,
      });
    }
    text = readFileSync(path, 'utf8').trim();
  } catch (error) {
    if (error instanceof LoopError) throw error;
    throw new LoopError('config-missing', `no console token in ${dataDir}`, {
      cause: error,
      hint: 'Start the daemon once (`the-loop serve`): it creates the token.',
    });
  }
  if (text.length < 32 || !B64URL.test(text)) {
    throw new LoopError('config-invalid', `${path} does not hold a console token`, {
      hint: 'Delete it and restart the daemon: a new one is made.',
    });
  }
  return text;
}

/** The signed text of a login code. */
const loginText = (exp: number, nonce: string, who: string) => `login|v1|${exp}|${nonce}|${who}`;

/** `v1.<exp>.<nonce>.<who>.<hmac>`: what `the-loop console` appends to `<origin>/login/`. */
export function mintLoginCode(
  token: string,
  who: string,
  nowMs: number = Date.now(),
): { code: string; expiresAt: string } {
  const exp = Math.floor(nowMs / 1000) + LOGIN_LIFETIME_S;
  const nonce = b64url(randomBytes(16));
  const whoB64 = b64url(Buffer.from(who.slice(0, 100), 'utf8'));
  const mac = b64url(hmac(token, loginText(exp, nonce, whoB64)));
  return { code: `v1.${exp}.${nonce}.${whoB64}.${mac}`, expiresAt: new Date(exp * 1000).toISOString() };
}

export interface ConsoleLogin {
  /** Shown to others (a take over's principal), never a credential; the first part of a ticket. */
  publicId: string;
  who: string;
  expiresAt: number;
}

export type LoginCheck =
  | { ok: true; who: string }
  | { ok: false; why: 'malformed' | 'forged' | 'expired' | 'used' | 'before-start' };

export interface ConsoleAuthOptions {
  token: string;
  sessionHours: number;
  now?: () => number;
}

/**
 * The daemon's side: login links checked once, logins kept (in memory only: a daemon restart logs
 * every browser out), tickets checked.
 */
export class ConsoleAuth {
  private readonly token: string;
  private readonly tokenDigest: Buffer;
  private readonly used = new Map<string, number>();
  /** Keyed by the SHA-256 of the cookie value: a lookup's timing says nothing of a real cookie. */
  private readonly logins = new Map<string, ConsoleLogin>();
  /** Each login's ticket key, kept off the login object so that no log line or JSON can carry it. */
  private readonly keys = new WeakMap<ConsoleLogin, Buffer>();
  private readonly now: () => number;
  private readonly sessionMs: number;
  /** When this run started (seconds): links minted earlier are refused. */
  private readonly startedS: number;

  constructor(options: ConsoleAuthOptions) {
    this.token = options.token;
    this.tokenDigest = createHash('sha256').update(options.token).digest();
    this.now = options.now ?? Date.now;
    this.sessionMs = Math.round(options.sessionHours * 3_600_000);
    this.startedS = this.now() / 1000;
  }

  /** A login code from `the-loop console`: well formed, signed, fresh and not used before. */
  checkLoginCode(code: string): LoginCheck {
    const parts = code.split('.');
    if (parts.length !== 5 || code.length > 600) return { ok: false, why: 'malformed' };
    const [version, expText, nonce, whoB64, mac] = parts as [string, string, string, string, string];
    if (version !== 'v1' || !/^\d{1,12}$/.test(expText)) return { ok: false, why: 'malformed' };
    if (!B64URL.test(nonce) || !B64URL.test(whoB64) || !B64URL.test(mac))
      return { ok: false, why: 'malformed' };
    const exp = Number(expText);
    if (!sameBytes(Buffer.from(mac, 'base64url'), hmac(this.token, loginText(exp, nonce, whoB64)))) {
      return { ok: false, why: 'forged' };
    }
    const nowS = this.now() / 1000;
    // A signed expiry further out than a link ever lives is refused too: nonces stay bounded.
    if (exp < nowS - SKEW_S || exp > nowS + LOGIN_LIFETIME_S + SKEW_S) return { ok: false, why: 'expired' };
    if (exp - LOGIN_LIFETIME_S < this.startedS - START_SKEW_S) return { ok: false, why: 'before-start' };
    this.forgetUsed(nowS);
    if (this.used.has(nonce) || this.used.size >= MAX_USED_NONCES) return { ok: false, why: 'used' };
    this.used.set(nonce, exp + SKEW_S);
    const who = Buffer.from(whoB64, 'base64url').toString('utf8').slice(0, 100);
    return { ok: true, who };
  }

  /**
   * A new console login: its cookie value (returned once, kept only hashed), what it is, and its
   * ticket key (returned once, for the login page to hand to the browser).
   */
  createLogin(who: string): { sid: string; login: ConsoleLogin; key: string } {
    const sid = b64url(randomBytes(32));
    const key = randomBytes(32);
    const login: ConsoleLogin = {
      publicId: randomBytes(8).toString('hex'),
      who,
      expiresAt: this.now() + this.sessionMs,
    };
    this.forgetLogins();
    if (this.logins.size >= MAX_LOGINS) {
      const [oldest] = this.logins.keys();
      if (oldest !== undefined) this.logins.delete(oldest);
    }
    this.logins.set(digestOf(sid), login);
    this.keys.set(login, key);
    return { sid, login, key: b64url(key) };
  }

  /** The live login a cookie value names, else undefined. */
  loginOf(sid: string | undefined): ConsoleLogin | undefined {
    if (!sid || sid.length > 100) return undefined;
    const key = digestOf(sid);
    const login = this.logins.get(key);
    if (!login) return undefined;
    if (login.expiresAt <= this.now()) {
      this.logins.delete(key);
      return undefined;
    }
    return login;
  }

  /**
   * A ticket the browser made with this login's key: `<publicId>.<nonce>.<mac>`, the mac being
   * HMAC-SHA256(key, ticketMessage(publicId, nonce)) in base64url. Another login's, or one made with
   * any other key, is refused.
   */
  checkTicket(ticket: string | undefined, login: ConsoleLogin): boolean {
    const key = this.keys.get(login);
    if (!key || !ticket || ticket.length > 200) return false;
    const parts = ticket.split('.');
    if (parts.length !== 3) return false;
    const [publicId, nonce, mac] = parts as [string, string, string];
    if (!B64URL.test(nonce) || nonce.length < 16 || !B64URL.test(mac)) return false;
    const expected = hmac(key, ticketMessage(login.publicId, nonce));
    // Both checked, always: the time taken does not say which one failed.
    const macOk = sameBytes(Buffer.from(mac, 'base64url'), expected);
    return sameSecret(publicId, login.publicId) && macOk;
  }

  /** `Authorization: Bearer <token>`, compared in constant time. */
  checkBearer(header: string | undefined): boolean {
    const match = /^Bearer ([A-Za-z0-9_-]{1,200})$/.exec(header ?? '');
    if (!match?.[1]) return false;
    return sameBytes(createHash('sha256').update(match[1]).digest(), this.tokenDigest);
  }

  /** How many logins and remembered nonces it holds (tests: bounded). */
  counts(): { logins: number; usedNonces: number } {
    return { logins: this.logins.size, usedNonces: this.used.size };
  }

  private forgetUsed(nowS: number): void {
    for (const [nonce, until] of this.used) if (until < nowS) this.used.delete(nonce);
  }

  private forgetLogins(): void {
    const now = this.now();
    for (const [key, login] of this.logins) if (login.expiresAt <= now) this.logins.delete(key);
  }
}

const digestOf = (sid: string) => createHash('sha256').update(sid).digest('hex');

export interface Bind {
  /** The address listened on (config console.host). */
  host: string;
  /** The port actually bound (port 0 resolved). */
  port: number;
  publicOrigin?: string | undefined;
  allowedHosts?: readonly string[] | undefined;
}

/** The loopback names of the listener (and the address itself, when another of 127/8). */
function loopbackNames(host: string, port: number): string[] {
  if (!isLoopbackHost(host)) return [];
  const names = ['127.0.0.1', 'localhost', '[::1]'];
  const own = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host.toLowerCase();
  if (!names.includes(own)) names.push(own);
  return names.map((name) => `${name}:${port}`);
}

/**
 * Host header values the console answers (lower case): the defence against DNS rebinding, where a
 * page of another site resolves its own name to 127.0.0.1 — its requests name that site's Host.
 */
export function allowedHostValues(bind: Bind): Set<string> {
  const hosts = loopbackNames(bind.host, bind.port);
  if (bind.publicOrigin) hosts.push(new URL(bind.publicOrigin).host);
  hosts.push(...(bind.allowedHosts ?? []));
  return new Set(hosts.map((h) => h.toLowerCase()));
}

/** Origins a page of the console has: compared by exact string, never against the Host. */
export function allowedOriginValues(bind: Bind): Set<string> {
  const origins = loopbackNames(bind.host, bind.port).map((h) => `http://${h}`);
  if (bind.publicOrigin) origins.push(new URL(bind.publicOrigin).origin);
  return new Set(origins);
}

/** The origin the CLI's link starts with: publicOrigin, else the loopback address listened on. */
export function consoleOrigin(bind: Bind): string {
  if (bind.publicOrigin) return new URL(bind.publicOrigin).origin;
  const host = bind.host.includes(':') && !bind.host.startsWith('[') ? `[${bind.host}]` : bind.host;
  return `http://${host}:${bind.port}`;
}
