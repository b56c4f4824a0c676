import type { IncomingMessage } from 'node:http';
import type { ConsoleAuth, ConsoleLogin } from './auth.js';
import { cookiesOf, headerOf, hostOf, LOGIN_COOKIE } from './http.js';
import { TICKET_HEADER, TICKET_PROTOCOL_PREFIX } from './protocol.js';

/**
 * Who a request is, and what it may do. A browser carries an ambient credential, the cookie, that
 * proves little: another site's page can make the browser send it, and the browser sends it to every
 * port of the host, so another local user's server on another port may receive it and replay it from
 * a process of their own, forging Origin and Host. So a cookie alone gets only data-free page
 * templates; every /api request and upgrade of a browser login also needs a ticket made with the
 * login's key (which only the console's own origin can read, from localStorage), and upgrades and
 * POSTs the console's exact Origin too (a forged cross-site request from a browser page cannot
 * forge it). A Bearer client carries no ambient credential: the token itself is the proof.
 */

export type Principal = { kind: 'login'; sid: string; login: ConsoleLogin } | { kind: 'bearer' };

export interface Access {
  auth: ConsoleAuth;
  /** Host header values answered (DNS rebinding defence). */
  hosts: ReadonlySet<string>;
  /** Origins of the console's own pages, compared by exact string. */
  origins: ReadonlySet<string>;
}

export const hostAllowed = (access: Access, req: IncomingMessage): boolean => access.hosts.has(hostOf(req));

/**
 * The request's principal: a Bearer token when an Authorization header is sent (a wrong one never
 * falls back to the cookie), else a live login's cookie; undefined: not authenticated.
 */
export function principalOf(access: Access, req: IncomingMessage): Principal | undefined {
  if (req.headers.authorization !== undefined) {
    return access.auth.checkBearer(headerOf(req, 'authorization')) ? { kind: 'bearer' } : undefined;
  }
  for (const sid of cookiesOf(req, LOGIN_COOKIE)) {
    const login = access.auth.loginOf(sid);
    if (login) return { kind: 'login', sid, login };
  }
  return undefined;
}

/** The page's origin: present, one value, and exactly one of the console's. */
export const originAllowed = (access: Access, req: IncomingMessage): boolean => {
  const origin = headerOf(req, 'origin');
  return origin !== undefined && access.origins.has(origin);
};

export const TICKET_REFUSAL = 'missing or invalid ticket: the login cookie alone is not enough';

/** Why a read (an /api GET) of this principal is refused: a browser login needs a valid ticket. */
export function readRefusal(
  access: Access,
  principal: Principal,
  ticket: string | undefined,
): string | undefined {
  if (principal.kind === 'bearer') return undefined;
  return access.auth.checkTicket(ticket, principal.login) ? undefined : TICKET_REFUSAL;
}

/**
 * Why a state-changing request (a POST, a WebSocket upgrade) of this principal is refused
 * (undefined: it may go on). The ticket comes from the `x-loop-ticket` header of a POST, or from a
 * `ticket.<t>` WebSocket sub-protocol.
 */
export function changeRefusal(
  access: Access,
  req: IncomingMessage,
  principal: Principal,
  ticket: string | undefined,
): string | undefined {
  if (principal.kind === 'bearer') return undefined;
  if (!originAllowed(access, req)) return 'origin not allowed';
  return readRefusal(access, principal, ticket);
}

/** The ticket header of an /api request. */
export const ticketHeader = (req: IncomingMessage): string | undefined => headerOf(req, TICKET_HEADER);

/** The sub-protocols a WebSocket client offered (at most a few; each trimmed). */
export function offeredProtocols(req: IncomingMessage): string[] {
  const header = headerOf(req, 'sec-websocket-protocol');
  if (!header || header.length > 1024) return [];
  return header
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .slice(0, 8);
}

/** The ticket among the offered sub-protocols (`ticket.<t>`). */
export function ticketProtocol(protocols: readonly string[]): string | undefined {
  const found = protocols.find((p) => p.startsWith(TICKET_PROTOCOL_PREFIX));
  return found?.slice(TICKET_PROTOCOL_PREFIX.length);
}
