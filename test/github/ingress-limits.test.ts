/**
 * The webhook ingress under the listener limits (web/limits.ts), through the real HTTP server and
 * a real SQLite inbox: a body that finds no room is answered 503 with Retry-After, the connection
 * closed and nothing stored; a shed unsigned body leaves room for a signed one.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createIngressHandler } from '../../src/github/ingress.js';
import { signBody } from '../../src/github/verify.js';
import { nullLogger } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import type { ListenerLimits } from '../../src/web/limits.js';
import { type HttpServer, startHttpServer } from '../../src/web/server.js';

const SECRET = 'ingress-limits-secret-7d3e1f0a9c';
const LIMIT = 256 * 1024;
const PATH = '/gh-webhook';
const BODY = Buffer.from(
  JSON.stringify(
    JSON.parse(readFileSync(new URL('../fixtures/github/issues.opened.json', import.meta.url), 'utf8')),
  ),
);

let dir: string;
let db: Db;
let server: HttpServer | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-ingress-limits-'));
  db = openDb(join(dir, 'state.sqlite'));
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(limits: Partial<ListenerLimits>): Promise<HttpServer> {
  server = await startHttpServer({
    host: '127.0.0.1',
    port: 0,
    logger: nullLogger,
    limits,
    routes: {
      [PATH]: createIngressHandler({
        secret: SECRET,
        maxBodyBytes: LIMIT,
        inbox: new SqliteInbox(db),
        logger: nullLogger,
        onAccepted: () => {},
        route: () => ({ action: 'ignore', reason: 'what is stored is all this test counts' }),
      }),
    },
  });
  return server;
}

/** An unsigned body that declares `declared` bytes and sends a little of it, then waits. */
function slowUnsigned(url: string, declared = LIMIT) {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  const conn = { socket, got: '', closed: new Promise<void>((r) => socket.once('close', () => r())) };
  socket.on('data', (d: Buffer) => {
    conn.got += d.toString('latin1');
  });
  socket.on('error', () => {});
  socket.write(
    `POST ${PATH} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nX-GitHub-Event: issues\r\n` +
      `X-GitHub-Delivery: ${randomUUID()}\r\nX-Hub-Signature-256: sha256=${'0'.repeat(64)}\r\n` +
      `Content-Length: ${declared}\r\n\r\n${'a'.repeat(1024)}`,
  );
  return conn;
}

const deliver = (url: string, id = randomUUID()) =>
  fetch(`${url}${PATH}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'issues',
      'x-github-delivery': id,
      'x-hub-signature-256': signBody(SECRET, BODY),
      connection: 'close',
    },
    body: new Uint8Array(BODY),
  });

const stored = () => (db.prepare('SELECT COUNT(*) AS n FROM deliveries').get() as { n: number }).n;

/** Until the server counts the slow body against its budget (bounded). */
async function heldByServer(http: HttpServer, bytes = LIMIT) {
  for (let i = 0; i < 200 && http.stats().heldBytes < bytes; i++) await new Promise((r) => setTimeout(r, 10));
  expect(http.stats().heldBytes).toBe(bytes);
}

describe('ingress under the listener limits', () => {
  it('answers 503 with Retry-After and closes when no body fits, storing nothing', async () => {
    // The budget holds one body of the delivery's size; the one held is young and no larger.
    const http = await start({ maxBufferedBytes: BODY.length + 100, graceMs: 60_000, retryAfterSeconds: 9 });
    const { url } = http;
    const slow = slowUnsigned(url, BODY.length);
    await heldByServer(http, BODY.length);
    const res = await deliver(url);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('9');
    expect(res.headers.get('connection')).toBe('close');
    expect(await res.text()).toMatch(/too many request bodies in flight/);
    expect(stored()).toBe(0);
    slow.socket.destroy();
  });

  it('a signed delivery sheds a slow unsigned body past its grace period, and is stored', async () => {
    // No larger than the delivery, so only its age lets it be shed.
    const http = await start({ maxBufferedBytes: BODY.length + 100, graceMs: 0 });
    const { url } = http;
    const slow = slowUnsigned(url, BODY.length);
    await heldByServer(http, BODY.length);
    const id = randomUUID();
    const res = await deliver(url, id);
    expect(res.status).toBe(202);
    expect(stored()).toBe(1);
    await slow.closed;
    expect(slow.got).toMatch(/^HTTP\/1\.1 503 [\s\S]*retry-after: 5/i);
  });

  it('a small signed delivery sheds a larger unsigned body even in its grace period', async () => {
    const http = await start({ maxBufferedBytes: LIMIT, graceMs: 60_000 });
    const slow = slowUnsigned(http.url);
    await heldByServer(http);
    expect((await deliver(http.url)).status).toBe(202);
    expect(stored()).toBe(1);
    await slow.closed;
    expect(slow.got).toMatch(/^HTTP\/1\.1 503 /);
  });
});
