import { createHash, timingSafeEqual } from 'node:crypto';
import type { Grant } from '../grant.js';

/**
 * Pure decisions of the connector's HTTP listener (`the-loop mcp --http`): which bind addresses are
 * allowed, which Host and Origin values a request may carry, whether its bearer token is the grant's,
 * and what a request that fails one of them is answered. The listener (listener.ts) only applies them.
 */

export const MCP_PATH = '/mcp';
/** A JSON-RPC message of the connector is a few kB; 1 MiB leaves room for a 64 KiB text many times over. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Sessions at once: each holds a connection with its own backends (a tmux client each). */
export const MAX_SESSIONS = 16;
/** A session that has made no request for this long is closed (its client must initialize again). */
export const SESSION_IDLE_MS = 30 * 60_000;

/** 127.0.0.0/8, ::1 and localhost: an address only this machine reaches. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h === '::1' || h === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** The host as it appears in a URL or a Host header (an IPv6 address in brackets). */
export const urlHost = (host: string): string =>
  host.includes(':') && !host.startsWith('[') ? `[${host.toLowerCase()}]` : host.toLowerCase();

/** The loopback names the listener answers to, with the port: what Host may say. */
function loopbackNames(host: string, port: number): string[] {
  const names = ['127.0.0.1', 'localhost', '[::1]'];
  const own = urlHost(host);
  if (!names.includes(own)) names.push(own);
  return names.map((name) => `${name}:${port}`);
}

export interface Access {
  /** Host header values answered (lower case): a page of a rebound domain names its own. */
  hosts: ReadonlySet<string>;
  /** Origin values allowed when a request carries one (a browser's): exact strings. */
  origins: ReadonlySet<string>;
  /** SHA-256 of the grant's token: compared in constant time with the digest of the one presented. */
  tokenDigest: Buffer;
}

export function accessFor(bind: { host: string; port: number }, token: string): Access {
  const hosts = loopbackNames(bind.host, bind.port);
  return {
    hosts: new Set(hosts),
    origins: new Set(hosts.map((h) => `http://${h}`)),
    tokenDigest: sha256(token),
  };
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * Whether an Authorization header carries the token. Both sides are hashed first, so the compare
 * takes the same time whatever the length or the content of what was presented.
 */
export function bearerMatches(authorization: string | undefined, tokenDigest: Buffer): boolean {
  const match = /^Bearer +([!-~]+) *$/i.exec(authorization ?? '');
  const presented = sha256(match?.[1] ?? '');
  // Always compare (even with no header at all): no early return a timer could tell apart.
  return timingSafeEqual(presented, tokenDigest) && match !== null;
}

export interface RequestHead {
  method: string;
  /** The request target as sent (`/mcp`, `/mcp?x`, `*`). */
  url: string;
  host: string | undefined;
  origin: string | undefined;
  authorization: string | undefined;
  contentType: string | undefined;
  /** The declared Content-Length, when there is one. */
  contentLength: number | undefined;
}

export type Verdict =
  | { ok: true }
  | { ok: false; status: number; message: string; headers?: Record<string, string> };

const refuse = (status: number, message: string, headers?: Record<string, string>): Verdict => ({
  ok: false,
  status,
  message,
  ...(headers ? { headers } : {}),
});

/** `application/json`, with parameters or not, in any case: the only body the transport takes. */
export function isJsonContentType(value: string | undefined): boolean {
  const type = (value ?? '').split(';')[0]?.trim().toLowerCase();
  return type === 'application/json';
}

/**
 * A request's head, judged before anything else is read: Host, then Origin (a browser page of
 * another site — DNS rebinding — is refused before it learns whether it has a token), then the
 * token, then the path, the method, and for a POST its content type and declared length.
 */
export function admitRequest(head: RequestHead, access: Access): Verdict {
  if (!head.host || !access.hosts.has(head.host.toLowerCase()))
    return refuse(403, 'Forbidden: this server answers only its loopback address (Host)');
  if (head.origin !== undefined && !access.origins.has(head.origin))
    return refuse(403, 'Forbidden: requests from a web page of another origin are refused (Origin)');
  if (!bearerMatches(head.authorization, access.tokenDigest))
    return refuse(401, 'Unauthorized: send Authorization: Bearer <the token in the token file>', {
      'www-authenticate': 'Bearer realm="the-loop mcp"',
    });
  const path = head.url.split('?')[0];
  if (path !== MCP_PATH) return refuse(404, `Not Found: the MCP endpoint is ${MCP_PATH}`);
  if (head.method !== 'POST' && head.method !== 'GET' && head.method !== 'DELETE')
    return refuse(405, 'Method Not Allowed', { allow: 'GET, POST, DELETE' });
  if (head.method !== 'POST') return { ok: true };
  if (!isJsonContentType(head.contentType))
    return refuse(415, 'Unsupported Media Type: Content-Type must be application/json');
  if (head.contentLength !== undefined && head.contentLength > MAX_BODY_BYTES)
    return refuse(413, `Payload Too Large: at most ${MAX_BODY_BYTES} bytes`);
  return { ok: true };
}

/** JSON with object keys sorted at every depth: the same grant always gives the same text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The token file's name for a grant: `<operator>-<8 hex>` where the hex are the start of a digest of
 * the effective grant, so two servers of one operator with different narrowings keep apart files.
 * Operator names are `[a-z0-9-]` (config), safe in a file name.
 */
export function tokenFileStem(grant: Grant): string {
  const digest = createHash('sha256').update(canonicalJson(grant)).digest('hex');
  return `${grant.operator}-${digest.slice(0, 8)}`;
}
