import type { IncomingMessage } from 'node:http';
import type { ConsoleAuth, ConsoleLogin } from './auth.js';
import { cookieOf, headerOf, hostOf, LOGIN_COOKIE } from './http.js';
import { TICKET_HEADER, TICKET_PROTOCOL_PREFIX } from './protocol.js';

/**
 * Who a request is, and whether it may change something. A browser carries an ambient credential
 * (the cookie) that another site's page could ride, so its upgrades and POSTs must also show the
 * console's exact Origin and a ticket only the console's own pages were given. A Bearer client
 * carries no ambient credential: the token itself is the proof.
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
  const sid = cookieOf(req, LOGIN_COOKIE);
  const login = access.auth.loginOf(sid);
  return sid && login ? { kind: 'login', sid, login } : undefined;
}

/** The page's origin: present, one value, and exactly one of the console's. */
export const originAllowed = (access: Access, req: IncomingMessage): boolean => {
  const origin = headerOf(req, 'origin');
  return origin !== undefined && access.origins.has(origin);
};

/**
 * Why a state-changing request of this principal is refused (undefined: it may go on). The ticket
 * comes from the `x-loop-ticket` header of a POST, or from a `ticket.<t>` WebSocket sub-protocol.
 */
export function changeRefusal(
  access: Access,
  req: IncomingMessage,
  principal: Principal,
  ticket: string | undefined,
): string | undefined {
  if (principal.kind === 'bearer') return undefined;
  if (!originAllowed(access, req)) return 'origin not allowed';
  if (!access.auth.checkTicket(ticket, principal.sid, principal.login)) return 'missing or invalid ticket';
  return undefined;
}

/** The ticket header of a POST. */
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
