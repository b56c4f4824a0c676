import {
  type Agent,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { HOP_BY_HOP } from '../hop-by-hop.js';

/**
 * The GitHub API upstream, as the gateway reaches it: the URL a path goes to, the headers sent (the
 * real token in place of whatever the client carried), one relayed exchange (the response streamed
 * back, and read on the way when an act is settled from it), and small JSON requests of our own for
 * lookups. The capability token never leaves this process.
 */

/**
 * Never relayed upstream: the client's credential (ours goes in its place), framing we redo, and a
 * method override (a POST must not become a DELETE after it was judged as a POST).
 */
const DROPPED = new Set([
  'host',
  'authorization',
  'cookie',
  'content-length',
  'expect',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
]);

function endToEnd(headers: IncomingHttpHeaders, drop: ReadonlySet<string>): OutgoingHttpHeaders {
  const conn = headers.connection;
  const listed = new Set(
    (Array.isArray(conn) ? conn.join(',') : (conn ?? ''))
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter((s) => s !== ''),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name) || drop.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** The headers sent upstream: the client's end-to-end ones, without its token, with ours. */
export function upstreamHeaders(
  incoming: IncomingHttpHeaders,
  capability: string,
  realToken: string | undefined,
  options: { identity: boolean; length: number },
): OutgoingHttpHeaders {
  const out = endToEnd(incoming, DROPPED);
  // The capability token anywhere else (a client that put it somewhere odd) is dropped.
  for (const [name, value] of Object.entries(out)) {
    const text = Array.isArray(value) ? value.join('\n') : String(value);
    if (capability !== '' && text.includes(capability)) delete out[name];
  }
  // Identity is always acceptable (RFC 9110 §12.5.3): the answer to an act is read on its way back.
  if (options.identity) out['accept-encoding'] = 'identity';
  if (realToken) out.authorization = `Bearer ${realToken}`;
  if (options.length > 0) out['content-length'] = String(options.length);
  return out;
}

export function clientHeaders(upstream: IncomingHttpHeaders): OutgoingHttpHeaders {
  return endToEnd(upstream, new Set());
}

/** `apiUrl` + path, or undefined when the result would leave the API's origin or its path prefix. */
export function upstreamUrl(apiUrl: string, path: string): URL | undefined {
  if (!path.startsWith('/')) return undefined;
  try {
    const base = new URL(apiUrl);
    const url = new URL(apiUrl.replace(/\/+$/, '') + path);
    const prefix = base.pathname.replace(/\/+$/, '');
    if (url.origin !== base.origin || url.username !== '' || url.password !== '') return undefined;
    // The path must reach the upstream as it was judged: a parser that resolved dots, turned a
    // backslash into a slash or cut at a `#` would send the request somewhere else.
    const q = path.indexOf('?');
    if (url.pathname !== prefix + (q === -1 ? path : path.slice(0, q))) return undefined;
    return url;
  } catch {
    return undefined;
  }
}

/** How a relayed exchange ended. */
export type Relayed =
  | { kind: 'response'; status: number; body: Buffer | undefined; encoding: string | undefined }
  | { kind: 'timeout' | 'error'; sentHeaders: boolean; status: number };

export interface RelayRequest {
  url: URL;
  method: string;
  headers: OutgoingHttpHeaders;
  body: Buffer;
  res: ServerResponse;
  /** Keep up to this many bytes of the response (to settle an act); 0: keep nothing. */
  keep: number;
  idleMs: number;
  agent: Agent | undefined;
}

/**
 * One exchange: the request sent whole, the response streamed to the client as it comes. Resolves
 * when it is over, never rejects. The exchange goes on when the client leaves, so an act's outcome
 * is still learned; silence for `idleMs` ends it.
 */
export function relay(x: RelayRequest): Promise<Relayed> {
  return new Promise<Relayed>((resolve) => {
    let done = false;
    let status = 0;
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let overflow = false;
    let current: IncomingMessage | undefined;
    const request = x.url.protocol === 'https:' ? httpsRequest : httpRequest;
    const up = request(x.url, { method: x.method, headers: x.headers, agent: x.agent });
    const finish = (result: Relayed): void => {
      if (done) return;
      done = true;
      clearTimeout(idle);
      if (result.kind !== 'response') {
        up.destroy();
        if (x.res.headersSent) x.res.destroy();
      }
      resolve(result);
    };
    const fail = (kind: 'timeout' | 'error') => finish({ kind, sentHeaders: x.res.headersSent, status });
    const idle = setTimeout(() => fail('timeout'), x.idleMs);
    idle.unref();
    up.on('error', () => fail('error'));
    up.on('response', (upRes) => {
      idle.refresh();
      status = upRes.statusCode ?? 502;
      if (!x.res.destroyed) {
        x.res.writeHead(status, clientHeaders(upRes.headers));
        x.res.flushHeaders();
      }
      x.res.on('drain', () => upRes.resume());
      upRes.on('data', (chunk: Buffer) => {
        idle.refresh();
        if (x.keep > 0 && !overflow) {
          keptBytes += chunk.length;
          if (keptBytes > x.keep) overflow = true;
          else kept.push(chunk);
        }
        if (!x.res.destroyed && !x.res.write(chunk)) upRes.pause();
      });
      upRes.on('end', () => {
        if (!x.res.destroyed) x.res.end();
        const encoding = upRes.headers['content-encoding'];
        const body = x.keep > 0 && !overflow ? Buffer.concat(kept) : undefined;
        finish({ kind: 'response', status, body, encoding });
      });
      upRes.on('error', () => fail('error'));
      upRes.on('close', () => {
        if (!upRes.complete) fail('error');
      });
      current = upRes;
    });
    // A reset client socket must not take the daemon down; its outcome is learned all the same.
    x.res.on('error', () => {});
    // A client gone mid-response: its socket is done; keep reading to learn the outcome.
    x.res.on('close', () => {
      if (x.res.writableFinished) return;
      x.res.destroy();
      current?.resume();
    });
    up.end(x.body);
  });
}

/** The response body as text, undoing a content encoding the upstream used anyway. */
export function decodedText(body: Buffer, encoding: string | undefined): string | undefined {
  try {
    switch ((encoding ?? 'identity').trim().toLowerCase()) {
      case 'identity':
        return body.toString('utf8');
      case 'gzip':
        return gunzipSync(body).toString('utf8');
      case 'deflate':
        return inflateSync(body).toString('utf8');
      case 'br':
        return brotliDecompressSync(body).toString('utf8');
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}

/** A JSON request of the gateway's own (a lookup), with the real token; undefined on any failure. */
export function requestJson(
  url: URL,
  options: {
    method: 'GET' | 'POST';
    token: string | undefined;
    body?: unknown;
    timeoutMs: number;
    /** The pool to use (the handler's, dropped when the gateway closes); default: Node's global one. */
    agent?: Agent | undefined;
  },
): Promise<{ status: number; json: unknown } | undefined> {
  return new Promise((resolve) => {
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
    const headers: OutgoingHttpHeaders = {
      accept: 'application/vnd.github+json',
      'accept-encoding': 'identity',
      'user-agent': 'the-loop-gateway',
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
    };
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = request(url, {
      method: options.method,
      headers,
      timeout: options.timeoutMs,
      ...(options.agent ? { agent: options.agent } : {}),
    });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.on('response', (res) => {
      res.on('data', (c: Buffer) => {
        size += c.length;
        // A lookup's answer is small; anything past 1 MB is not one.
        if (size > 1024 * 1024) req.destroy();
        else chunks.push(c);
      });
      res.on('error', () => resolve(undefined));
      res.on('close', () => resolve(undefined));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        } catch {
          resolve(undefined);
        }
      });
    });
    req.end(payload);
  });
}
