/**
 * The listener limits on a real HTTP server and real sockets: hostile and malformed input (headers
 * too long or never finished, a Content-Length over the limit or lying, a slow body, a body budget
 * full, a connection cap reached). Every refusal is checked on the wire, and that nothing is held
 * afterwards.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LoopError } from '../../src/core/errors.js';
import { LISTENER_DEFAULTS, ListenerGuard, type ListenerLimits, validLimits } from '../../src/web/limits.js';
import { busyHeaders, readBodyWithin } from '../../src/web/read-body.js';

const KB = 1024;
const MAX_BODY = 1024 * KB;
const open: { server: Server; guard: ListenerGuard }[] = [];
const releases: (() => void)[] = [];

afterEach(async () => {
  for (const r of releases.splice(0)) r();
  for (const { server } of open.splice(0)) {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

/** Reads POST bodies with `readBodyWithin`; `GET /hold` answers only when released. */
async function serve(limits: Partial<ListenerLimits>) {
  const guard = new ListenerGuard(limits);
  const server = guard.createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url === '/hold') {
      releases.push(() => res.end('released'));
      return;
    }
    if (req.method === 'GET') return res.end('ok');
    const read = await readBodyWithin(req, MAX_BODY);
    if (read.ok) return res.end(`read ${read.body.length}`);
    if (read.why === 'too-large') res.writeHead(413, { connection: 'close' });
    else if (read.why === 'busy') res.writeHead(503, busyHeaders(req));
    else res.writeHead(400, { connection: 'close' });
    res.end(read.why);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  open.push({ server, guard });
  return { guard, port: (server.address() as AddressInfo).port };
}

/** A raw connection: what it received, and when it closed. */
function raw(port: number, text = '') {
  const socket = connect(port, '127.0.0.1');
  const conn = { socket, got: '', closed: new Promise<void>((r) => socket.once('close', () => r())) };
  socket.on('data', (d: Buffer) => {
    conn.got += d.toString('latin1');
  });
  socket.on('error', () => {});
  if (text) socket.write(text);
  return conn;
}

const post = (length: number | 'chunked') =>
  `POST /x HTTP/1.1\r\nHost: t\r\n${length === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`}\r\n\r\n`;

function get(port: number, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

function send(port: number, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/x', method: 'POST', agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function until(what: string, probe: () => boolean): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (probe()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('headers', () => {
  it('answers headers past maxHeaderBytes with 431 and closes', async () => {
    const { port } = await serve({ maxHeaderBytes: 8 * KB });
    const c = raw(port, `GET / HTTP/1.1\r\nHost: t\r\nX-Big: ${'a'.repeat(20 * KB)}\r\n\r\n`);
    await c.closed;
    expect(c.got).toMatch(/^HTTP\/1\.1 431 /);
  });

  it('closes a connection that never finishes its headers (408) after the header deadline', async () => {
    const { port, guard } = await serve({ headersTimeoutMs: 200, requestTimeoutMs: 400 });
    const c = raw(port, 'POST /x HTTP/1.1\r\nHost: t\r\nX-Never: ');
    await c.closed;
    expect(c.got).toMatch(/^HTTP\/1\.1 408 /);
    await until('the connection to be forgotten', () => guard.stats().open === 0);
  });

  it('answers a malformed request line 400 and closes, holding nothing', async () => {
    const { port, guard } = await serve({});
    const c = raw(port, 'NOT HTTP AT ALL\r\n\r\n');
    await c.closed;
    expect(c.got).toMatch(/^HTTP\/1\.1 400 /);
    expect(guard.stats()).toMatchObject({ heldBytes: 0 });
  });
});

describe('bodies', () => {
  it('refuses a Content-Length over the limit before a byte of the body is sent', async () => {
    const { port, guard } = await serve({});
    const c = raw(port, post(10 * MAX_BODY));
    await c.closed;
    expect(c.got).toMatch(/^HTTP\/1\.1 413 /);
    expect(guard.stats().heldBytes).toBe(0);
  });

  it('cuts a slow body trickle at the request deadline (408), and lets its bytes go', async () => {
    const { port, guard } = await serve({ headersTimeoutMs: 200, requestTimeoutMs: 500 });
    const c = raw(port, post(1000));
    await until('the body to be held', () => guard.stats().heldBytes === 1000);
    const trickle = setInterval(() => c.socket.write('a'), 50);
    await c.closed;
    clearInterval(trickle);
    expect(c.got).toMatch(/^HTTP\/1\.1 408 /);
    await until('the body to be let go', () => guard.stats().heldBytes === 0);
  });

  it('a Content-Length longer than what is sent never completes: cut, nothing kept', async () => {
    const { port, guard } = await serve({ headersTimeoutMs: 200, requestTimeoutMs: 500 });
    const c = raw(port, `${post(100)}only-20-bytes-here..`);
    await c.closed;
    expect(c.got).toMatch(/^HTTP\/1\.1 408 /);
    expect(guard.stats().heldBytes).toBe(0);
  });

  it('a Content-Length shorter than what is sent: the rest is a malformed request (400, closed), nothing kept', async () => {
    const { port, guard } = await serve({});
    const c = raw(port, `${post(10)}0123456789GARBAGE-AFTER-THE-BODY\r\n\r\n`);
    await c.closed;
    expect(c.got).toMatch(/HTTP\/1\.1 400 /);
    await until('the connection to be forgotten', () => guard.stats().open === 0);
    expect(guard.stats().heldBytes).toBe(0);
  });

  it('past the budget a newcomer sheds the slowest older body (503, Retry-After, closed), and is read whole', async () => {
    const { port, guard } = await serve({ maxBufferedBytes: MAX_BODY, graceMs: 0, retryAfterSeconds: 7 });
    const slow = raw(port, `${post(800 * KB)}${'a'.repeat(100 * KB)}`);
    await until('the slow body to be held', () => guard.stats().heldBytes === 800 * KB);
    const fast = await send(port, Buffer.alloc(500 * KB, 'b'));
    expect(fast).toEqual({ status: 200, text: `read ${500 * KB}` });
    await slow.closed;
    expect(slow.got).toMatch(/^HTTP\/1\.1 503 [\s\S]*retry-after: 7\r\n[\s\S]*connection: close/i);
    expect(guard.stats()).toMatchObject({ heldBytes: 0, shedBodies: 1 });
  });

  it('within its grace period an older body no larger than the newcomer is kept, the newcomer refused (503)', async () => {
    const { port, guard } = await serve({ maxBufferedBytes: MAX_BODY, graceMs: 60_000 });
    const first = raw(port, `${post(800 * KB)}${'a'.repeat(100 * KB)}`);
    await until('the first body to be held', () => guard.stats().heldBytes === 800 * KB);
    const second = await send(port, Buffer.alloc(900 * KB, 'b'));
    expect(second.status).toBe(503);
    first.socket.write('a'.repeat(700 * KB));
    await until('the first body to be answered', () => first.got.includes(`read ${800 * KB}`));
    expect(first.got).toMatch(/^HTTP\/1\.1 200 /);
    expect(guard.stats()).toMatchObject({ heldBytes: 0, refusedBodies: 1, shedBodies: 0 });
  });

  it('a chunked body (no length to refuse up front) is stopped when it grows past the budget', async () => {
    const { port, guard } = await serve({ maxBufferedBytes: 256 * KB, graceMs: 0 });
    const c = raw(port, post('chunked'));
    const chunk = `${(64 * KB).toString(16)}\r\n${'c'.repeat(64 * KB)}\r\n`;
    for (let i = 0; i < 8 && !c.socket.destroyed; i++) {
      c.socket.write(chunk);
      await new Promise((r) => setTimeout(r, 20));
    }
    await c.closed;
    expect(c.got).toMatch(/^HTTP\/1\.1 503 /);
    expect(guard.stats()).toMatchObject({ heldBytes: 0, refusedBodies: 1 });
  });
});

describe('connections', () => {
  it('past the cap sheds the connection waiting longest for its headers, and serves the newcomer', async () => {
    const { port, guard } = await serve({ maxConnections: 4 });
    const idle = [raw(port), raw(port), raw(port), raw(port)];
    await until('four connections', () => guard.stats().open === 4);
    expect(await get(port, '/')).toEqual({ status: 200, text: 'ok' });
    await idle[0]?.closed;
    expect(idle[0]?.got).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\nRetry-After: 5\r\n/);
    expect(idle.slice(1).every((c) => !c.socket.destroyed)).toBe(true);
    expect(guard.stats()).toMatchObject({ shedWaiting: 1, refusedConnections: 0 });
  });

  it('a pipelining connection is not idle while a request of it is still being answered', async () => {
    const { port, guard } = await serve({ maxConnections: 2 });
    const piped = raw(port, 'GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /hold HTTP/1.1\r\nHost: t\r\n\r\n');
    await until(
      'the first answered and the second held',
      () => piped.got.includes('ok') && releases.length === 1,
    );
    const idle = raw(port);
    await until('two connections', () => guard.stats().open === 2);
    const late = raw(port);
    // The connection waiting for its headers is shed, not the one whose second request is held.
    await idle.closed;
    expect(piped.socket.destroyed).toBe(false);
    for (const r of releases.splice(0)) r();
    await until('the held request to be answered', () => piped.got.includes('released'));
    expect(piped.got).not.toMatch(/503/);
    late.socket.destroy();
  });

  it('sheds a kept-alive connection by closing it, never with a 503 it could take for an answer', async () => {
    const { port, guard } = await serve({ maxConnections: 2 });
    const kept = raw(port, 'GET / HTTP/1.1\r\nHost: t\r\n\r\n');
    await until('the first answer', () => kept.got.includes('ok'));
    const other = raw(port);
    await until('two connections', () => guard.stats().open === 2);
    const late = raw(port);
    await kept.closed;
    expect(kept.got).not.toMatch(/503/);
    expect(guard.stats().shedWaiting).toBe(1);
    other.socket.destroy();
    late.socket.destroy();
  });

  it('refuses the newcomer when every connection is busy with a request that reads no body', async () => {
    const { port, guard } = await serve({ maxConnections: 2 });
    const held = [
      raw(port, 'GET /hold HTTP/1.1\r\nHost: t\r\n\r\n'),
      raw(port, 'GET /hold HTTP/1.1\r\nHost: t\r\n\r\n'),
    ];
    await until('two held requests', () => releases.length === 2);
    const late = raw(port);
    await late.closed;
    expect(late.got).toMatch(/^HTTP\/1\.1 503 /);
    expect(guard.stats().refusedConnections).toBe(1);
    for (const r of releases.splice(0)) r();
    await until('the held requests to be answered', () => held.every((c) => c.got.includes('released')));
  });
});

describe('upgrades', () => {
  /** A server whose upgrades become a raw echo (what a WebSocket is to the guard: not HTTP any more). */
  async function serveUpgrades(limits: Partial<ListenerLimits>) {
    const guard = new ListenerGuard(limits);
    const server = guard.createServer(
      (_req, res) => res.end('ok'),
      (_req, socket) => {
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
        socket.on('data', (d: Buffer) => socket.write(d));
        // An HTTP server's sockets are half-open: the echo ends its side when the client ends its own.
        socket.on('end', () => socket.end());
      },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    open.push({ server, guard });
    return { guard, port: (server.address() as AddressInfo).port };
  }
  const upgrade = 'GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n';

  it('an upgraded connection leaves the cap: idle ones are shed instead, and it is never written a 503', async () => {
    const { port, guard } = await serveUpgrades({ maxConnections: 2 });
    const socket = raw(port, upgrade);
    await until('the upgrade', () => socket.got.includes('101 Switching Protocols'));
    expect(guard.stats()).toMatchObject({ open: 0, upgraded: 1 });
    const idle = [raw(port), raw(port), raw(port)];
    await idle[0]?.closed;
    expect(idle[0]?.got).toMatch(/^HTTP\/1\.1 503 /);
    socket.socket.write('still here');
    await until('the echo', () => socket.got.endsWith('still here'));
    expect(socket.got).not.toMatch(/503/);
    expect(guard.stats()).toMatchObject({ open: 2, upgraded: 1, shedWaiting: 1, refusedConnections: 0 });
    socket.socket.destroy();
    await until('the upgraded connection to be forgotten', () => guard.stats().upgraded === 0);
    for (const c of idle) c.socket.destroy();
    await until('no connection', () => guard.stats().open === 0);
  });

  it('without an upgrade handler an upgrade request is a plain request (the webhook listener)', async () => {
    const { port, guard } = await serve({});
    const c = raw(port, upgrade);
    await until('the answer', () => c.got.includes('ok'));
    expect(c.got).toMatch(/^HTTP\/1\.1 200 /);
    expect(guard.stats()).toMatchObject({ open: 1, upgraded: 0 });
    c.socket.destroy();
  });
});

describe('validLimits', () => {
  it('accepts the defaults and refuses limits that cannot work together, naming them', () => {
    expect(validLimits({ ...LISTENER_DEFAULTS })).toEqual(LISTENER_DEFAULTS);
    const bad = (l: Partial<ListenerLimits>) => () => validLimits({ ...LISTENER_DEFAULTS, ...l });
    expect(bad({ headersTimeoutMs: 30_000, requestTimeoutMs: 20_000 })).toThrow(
      /must not exceed requestTimeoutMs/,
    );
    expect(bad({ maxConnections: 0 })).toThrow(/maxConnections must be at least 1/);
    expect(bad({ maxBufferedBytes: -1 })).toThrow(/maxBufferedBytes must be a whole number/);
    expect(bad({ graceMs: 1.5 })).toThrow(LoopError);
    // No whole-request deadline (the gateway's streams) is fine with any header deadline.
    expect(validLimits({ ...LISTENER_DEFAULTS, requestTimeoutMs: 0 }).requestTimeoutMs).toBe(0);
  });
});
