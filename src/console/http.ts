import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * What every console response carries, and small helpers to answer. The CSP allows scripts, styles,
 * fonts and connections only from the console's own origin: no inline script, no CDN, no framing.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONSOLE_CSP,
  // The login page carries a login's key, API answers carry session data: nothing is kept by a cache.
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

export const LOGIN_COOKIE = 'loop_console';

/** Set the security headers (before anything else is written). */
export function secure(res: ServerResponse): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
}

export function send(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  type: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, `${JSON.stringify(value)}\n`, 'application/json; charset=utf-8');
}

/** A JSON error: what went wrong, and what to do (a hint), never a stack. */
export function sendError(res: ServerResponse, status: number, error: string, hint?: string): void {
  sendJson(res, status, hint ? { error, hint } : { error });
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A small page of text (the login's refusals, 401): no script, styled by nothing. */
export function sendMessagePage(res: ServerResponse, status: number, title: string, lines: string[]): void {
  const body = [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">',
    `<title>${escapeHtml(title)} · the-loop</title></head><body>`,
    `<h1>${escapeHtml(title)}</h1>`,
    ...lines.map((line) => `<p>${escapeHtml(line)}</p>`),
    '</body></html>',
    '',
  ].join('\n');
  send(res, status, body, 'text/html; charset=utf-8');
}

/**
 * Every value of a cookie, in the order sent. Another port of the console's host can set a cookie
 * of the same name (cookies are not isolated by port; a longer Path is sent first): the caller takes
 * the first value that means something, so a planted one cannot log the person out.
 */
export function cookiesOf(req: IncomingMessage, name: string): string[] {
  const header = req.headers.cookie;
  if (!header || header.length > 8192) return [];
  const values: string[] = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) values.push(part.slice(eq + 1).trim());
  }
  return values.slice(0, 8);
}

/**
 * The login cookie: script-proof, for the whole console. SameSite=Strict keeps it off requests other
 * sites start, but a site is scheme + host without the port: the browser sends it to every port of
 * the console's host (another local user's server there too). So it is never enough alone: see
 * access.ts.
 */
export function loginCookie(sid: string, options: { secure: boolean; maxAgeS: number }): string {
  return [
    `${LOGIN_COOKIE}=${sid}`,
    'HttpOnly',
    'SameSite=Strict',
    'Path=/',
    `Max-Age=${Math.floor(options.maxAgeS)}`,
    ...(options.secure ? ['Secure'] : []),
  ].join('; ');
}

/** The Host header, lower case (one value; Node joins nothing for Host). */
export const hostOf = (req: IncomingMessage): string => (req.headers.host ?? '').toLowerCase();

/** A path to log: a login code is never written anywhere. */
export const loggablePath = (path: string): string => (path.startsWith('/login/') ? '/login/…' : path);

/** A single header's value (a repeated one is refused: undefined). */
export function headerOf(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}
