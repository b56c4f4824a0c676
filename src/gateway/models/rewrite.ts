import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { HOP_BY_HOP } from '../hop-by-hop.js';

/**
 * What the gateway changes in a model request and its response on their way through. Pure.
 *
 * The capability token is replaced by the real credential wherever the client put it — `x-api-key`
 * (Claude Code's ANTHROPIC_API_KEY), `Authorization: Bearer` (ANTHROPIC_AUTH_TOKEN,
 * CLAUDE_CODE_OAUTH_TOKEN, Codex's env_key), `x-goog-api-key` (Gemini CLI) or the `key` query
 * parameter (Google's other way) — and in the same place, so the upstream sees the request exactly
 * as if the engine held the key. Without a real credential the token is removed, never forwarded.
 * Any other credential (a subscription's OAuth bearer the engine logged in with) passes unchanged.
 */

/** Fields the connection header names are hop-by-hop too. */
function connectionListed(headers: IncomingHttpHeaders): Set<string> {
  const value = headers.connection;
  const text = Array.isArray(value) ? value.join(',') : (value ?? '');
  return new Set(
    text
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter((s) => s !== ''),
  );
}

function endToEnd(headers: IncomingHttpHeaders, drop: readonly string[]): OutgoingHttpHeaders {
  const listed = connectionListed(headers);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name) || drop.includes(name)) continue;
    out[name] = value;
  }
  return out;
}

const carries = (value: OutgoingHttpHeaders[string], token: string): boolean =>
  value !== undefined && (Array.isArray(value) ? value.join('\n') : String(value)).includes(token);

/**
 * The headers sent upstream. `host` is left to the client library (set from the upstream URL);
 * `expect` is ours to answer; `accept-encoding: identity` keeps the body readable by the meter
 * without decoding a copy (identity is always acceptable, RFC 9110 §12.5.3; a loopback hop gains
 * nothing from compression, and the bytes reach the engine unchanged).
 */
export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  token: string,
  credential: string | undefined,
): OutgoingHttpHeaders {
  const out = endToEnd(incoming, ['host', 'expect', 'accept-encoding']);
  out['accept-encoding'] = 'identity';
  for (const name of ['x-api-key', 'x-goog-api-key']) {
    const value = out[name];
    if (typeof value !== 'string' || value.trim() !== token) continue;
    if (credential === undefined) delete out[name];
    else out[name] = credential;
  }
  const auth = out.authorization;
  const bearer = typeof auth === 'string' ? /^bearer\s+(\S+)\s*$/i.exec(auth) : null;
  if (bearer && bearer[1] === token) {
    if (credential === undefined) delete out.authorization;
    else out.authorization = `Bearer ${credential}`;
  }
  // The token anywhere else (a client that put it somewhere unexpected) is dropped, never relayed.
  for (const [name, value] of Object.entries(out)) if (carries(value, token)) delete out[name];
  return out;
}

/** The response headers relayed to the engine: end-to-end ones only (Node frames the body itself). */
export function clientResponseHeaders(upstream: IncomingHttpHeaders): OutgoingHttpHeaders {
  return endToEnd(upstream, []);
}

/**
 * The upstream URL: the route's base (which may carry a path prefix, e.g. `…/v1` for OpenAI-style
 * bases) plus the path the engine appended, concatenated. Undefined when the result would leave the
 * base — another origin (`@host`, `//host` tricks) or above its prefix (`..` segments, encoded or
 * not): the engine gets a 404 and nothing is forwarded.
 */
export function upstreamUrl(
  upstream: string,
  path: string,
  token: string,
  credential: string | undefined,
): URL | undefined {
  if (path !== '' && !path.startsWith('/') && !path.startsWith('?')) return undefined;
  let base: URL;
  let url: URL;
  try {
    base = new URL(upstream);
    url = new URL(upstream.replace(/\/+$/, '') + path);
  } catch {
    return undefined;
  }
  if (url.origin !== base.origin || url.username !== '' || url.password !== '') return undefined;
  const prefix = base.pathname.replace(/\/+$/, '');
  if (prefix !== '' && url.pathname !== prefix && !url.pathname.startsWith(`${prefix}/`)) return undefined;
  if (url.search.includes(token)) {
    // Google takes the key as `?key=` too: swapped in place; any other parameter holding it goes.
    for (const [name, value] of [...url.searchParams]) {
      if (!value.includes(token)) continue;
      if (name === 'key' && value === token && credential !== undefined)
        url.searchParams.set(name, credential);
      else url.searchParams.delete(name);
    }
  }
  return url;
}

/**
 * The path of `url` under the base's own path prefix: what the engine appended, as it goes
 * upstream (dot segments resolved, percent-encoding kept), without the query. `url` is one
 * `upstreamUrl` made from this base, so it is under the prefix.
 */
export function pathUnderBase(upstream: string, url: URL): string {
  const prefix = new URL(upstream).pathname.replace(/\/+$/, '');
  return url.pathname.slice(prefix.length);
}
