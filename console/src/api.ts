/**
 * Talking to the daemon. The login cookie alone opens nothing but data-free pages: browsers send it
 * to every port of the host, so another local user's server on another port may receive it. Every
 * API request and socket of a page therefore also carries a ticket the page makes itself: an HMAC
 * of the login's public id and a nonce under the login's key, which the login page left in
 * localStorage — per origin, port included, so no page of another port (nor another site) reads it.
 */
import { LOGIN_STORAGE_KEY, TICKET_HEADER, ticketMessage } from '../../src/console/protocol.js';

/** What a page says when this browser holds no key of a login (logged in from another profile). */
export const LOG_IN_AGAIN =
  'This browser holds no console login: log in again: run `the-loop console` and open the link it prints.';

export interface StoredLogin {
  publicId: string;
  key: string;
}

/** Keep the login the login page was given (false: the browser refused to store it). */
export function storeLogin(login: StoredLogin): boolean {
  try {
    localStorage.setItem(LOGIN_STORAGE_KEY, JSON.stringify(login));
    return true;
  } catch {
    // Storage blocked (site data disallowed): the pages could not make a ticket.
    return false;
  }
}

/** The login this browser keeps for this origin, if any. */
export function storedLogin(): StoredLogin | undefined {
  try {
    const value: unknown = JSON.parse(localStorage.getItem(LOGIN_STORAGE_KEY) ?? 'null');
    const { publicId, key } = (value ?? {}) as { publicId?: unknown; key?: unknown };
    return typeof publicId === 'string' && typeof key === 'string' && publicId && key
      ? { publicId, key }
      : undefined;
  } catch {
    return undefined;
  }
}

const b64url = (bytes: Uint8Array): string =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
const fromB64url = (text: string): Uint8Array<ArrayBuffer> =>
  Uint8Array.from(atob(text.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

async function makeTicket(login: StoredLogin): Promise<string> {
  // crypto.subtle exists only in secure contexts: https, and http on loopback (what the daemon allows).
  if (!crypto.subtle) throw new ApiError('this page is not a secure context (https or loopback)', 0);
  const key = await crypto.subtle.importKey(
    'raw',
    fromB64url(login.key),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  const nonce = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const message = new TextEncoder().encode(ticketMessage(login.publicId, nonce));
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, message));
  return `${login.publicId}.${nonce}.${b64url(mac)}`;
}

/** The page's ticket, made once per page and per login (a login in another tab replaces the key). */
let made: { of: string; ticket: Promise<string> } | undefined;

export function ticket(): Promise<string> {
  const login = storedLogin();
  if (!login) return Promise.reject(new ApiError(LOG_IN_AGAIN, 401));
  const of = `${login.publicId}.${login.key}`;
  if (made?.of !== of) {
    const attempt = { of, ticket: makeTicket(login) };
    // A failure is not kept: the next request tries again.
    attempt.ticket.catch(() => {
      if (made === attempt) made = undefined;
    });
    made = attempt;
  }
  return made.ticket;
}

/** The error a failed response names: its JSON `error` or `message`, else its status. */
async function failure(response: Response): Promise<ApiError> {
  let message = `${response.status} ${response.statusText}`.trim();
  try {
    const body: unknown = await response.json();
    if (body && typeof body === 'object') {
      const { error, message: text, hint } = body as { error?: unknown; message?: unknown; hint?: unknown };
      const named = typeof error === 'string' && error ? error : typeof text === 'string' && text ? text : '';
      if (named) message = typeof hint === 'string' && hint ? `${named} (${hint})` : named;
    }
  } catch {
    // Not JSON (a proxy's page, a dropped connection): the status says enough.
  }
  if (response.status === 401) message = `${message}: log in again with \`the-loop console\``;
  return new ApiError(message, response.status);
}

export async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(path, {
    credentials: 'same-origin',
    headers: { accept: 'application/json', [TICKET_HEADER]: await ticket() },
    cache: 'no-store',
  });
  if (!response.ok) throw await failure(response);
  return (await response.json()) as T;
}

/** A state-changing request: JSON body, the ticket header (the server checks it and the Origin). */
export async function postJson<T = unknown>(path: string, body: unknown = {}): Promise<T> {
  const response = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      [TICKET_HEADER]: await ticket(),
    },
    body: JSON.stringify(body),
    cache: 'no-store',
  });
  if (!response.ok) throw await failure(response);
  const text = await response.text();
  return (text ? JSON.parse(text) : {}) as T;
}

/** The sub-protocols both sockets open with: the protocol's name, then the ticket. */
export async function socketProtocols(protocol: string, prefix: string): Promise<string[]> {
  return [protocol, `${prefix}${await ticket()}`];
}

/** ws:// or wss:// to this origin. */
export function socketUrl(path: string): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${path}`;
}
