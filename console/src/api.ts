/**
 * Talking to the daemon: GETs with the login cookie (same origin), POSTs with the page's ticket too
 * (the server rendered it into `<meta name="loop-ticket">`; a cross-site page cannot read it, which
 * is what makes a forged POST fail even though the cookie would be sent).
 */
import { TICKET_HEADER, TICKET_META } from '../../src/console/protocol.js';

let cachedTicket: string | undefined;

/** The page's ticket ('' when the page was served without one, e.g. opened from disk). */
export function ticket(): string {
  if (cachedTicket === undefined) {
    const meta = document.querySelector<HTMLMetaElement>(`meta[name="${TICKET_META}"]`);
    cachedTicket = meta?.content ?? '';
  }
  return cachedTicket;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
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
    headers: { accept: 'application/json' },
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
    headers: { 'content-type': 'application/json', accept: 'application/json', [TICKET_HEADER]: ticket() },
    body: JSON.stringify(body),
    cache: 'no-store',
  });
  if (!response.ok) throw await failure(response);
  const text = await response.text();
  return (text ? JSON.parse(text) : {}) as T;
}

/** The sub-protocols both sockets open with: the protocol's name, then the ticket. */
export function socketProtocols(protocol: string, prefix: string): string[] {
  return [protocol, `${prefix}${ticket()}`];
}

/** ws:// or wss:// to this origin. */
export function socketUrl(path: string): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${path}`;
}
