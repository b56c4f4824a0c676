import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RoutedDelivery } from '../../src/core/ports/inbox.js';
import { createIngressHandler } from '../../src/github/ingress.js';
import { signBody } from '../../src/github/verify.js';
import { createLogger, memorySink, nullLogger } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { type HttpServer, startHttpServer } from '../../src/web/server.js';

const SECRET = 'ingress-test-secret-4f1c9a7e2b';
const LIMIT = 64 * 1024;
const PATH = '/gh-webhook';

/** GitHub sends compact JSON; the fixture files are pretty-printed. These are the exact bytes sent. */
const compact = (file: string): string =>
  JSON.stringify(JSON.parse(readFileSync(new URL(`../fixtures/github/${file}`, import.meta.url), 'utf8')));
const ISSUE_OPENED = compact('issues.opened.json');
const COMMENT = compact('issue_comment.created.json');
const PING = compact('ping.json');

let dir: string;
let db: Db;
let inbox: SqliteInbox;
let server: HttpServer;
const sink = memorySink();
const accepted: string[] = [];
/** Every call of the router, by delivery event: a delivery is routed once, on arrival. */
const routedCalls: string[] = [];
/**
 * The router stands in for routeEvent: every delivery runs a turn (queued); `explode` throws;
 * `settle` is ignored (settled on arrival).
 */
const route = (event: string, payload: object): RoutedDelivery => {
  routedCalls.push(event);
  if ('explode' in payload) throw new Error('the router broke');
  if ('settle' in payload)
    return { action: 'ignore', reason: 'nothing to do', workItem: 'github:octo/widgets#15' };
  return {
    action: event === 'issues' ? 'start' : 'deliver',
    workItem: 'github:octo/widgets#15',
    repo: 'octo/widgets',
    prompt: `a prompt for ${event}`,
    engine: '',
    runner: '',
    repoPath: '/repos/widgets',
    workspace: 'checkout',
    author: 'octocat',
    trigger: 'mention @the-loop',
  };
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-ingress-'));
  db = openDb(join(dir, 'state.sqlite'));
  inbox = new SqliteInbox(db);
  const logger = createLogger({ level: 'debug', sinks: [sink] });
  server = await startHttpServer({
    host: '127.0.0.1',
    port: 0,
    logger,
    routes: {
      [PATH]: createIngressHandler({
        secret: SECRET,
        maxBodyBytes: LIMIT,
        inbox,
        logger,
        onAccepted: (id) => accepted.push(id),
        route,
      }),
    },
  });
});

afterAll(async () => {
  await server?.close();
  db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const rows = (id: string): number =>
  (db.prepare('SELECT COUNT(*) AS n FROM deliveries WHERE id = ?').get(id) as { n: number }).n;
const totalRows = (): number => (db.prepare('SELECT COUNT(*) AS n FROM deliveries').get() as { n: number }).n;
const timesAccepted = (id: string): number => accepted.filter((a) => a === id).length;

interface Sent {
  event?: string | null;
  delivery?: string | null;
  body?: string | Buffer;
  /** A header value; null leaves the header out; default: the signature of `body` with SECRET. */
  signature?: string | null;
  contentType?: string | null;
  method?: string;
  path?: string;
}

interface Answer {
  status: number;
  text: string;
  headers: Headers;
}

async function send(options: Sent = {}): Promise<Answer> {
  const method = options.method ?? 'POST';
  const body = options.body ?? ISSUE_OPENED;
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const headers: Record<string, string> = {};
  const contentType = options.contentType === undefined ? 'application/json' : options.contentType;
  if (contentType !== null) headers['content-type'] = contentType;
  const event = options.event === undefined ? 'issues' : options.event;
  if (event !== null) headers['x-github-event'] = event;
  const delivery = options.delivery === undefined ? randomUUID() : options.delivery;
  if (delivery !== null) headers['x-github-delivery'] = delivery;
  const signature = options.signature === undefined ? signBody(SECRET, bytes) : options.signature;
  if (signature !== null) headers['x-hub-signature-256'] = signature;
  const res = await fetch(`${server.url}${options.path ?? PATH}`, {
    method,
    headers,
    body: method === 'GET' || method === 'HEAD' ? undefined : new Uint8Array(bytes),
  });
  return { status: res.status, text: (await res.text()).trim(), headers: res.headers };
}

/**
 * A request written by hand on a raw socket (for what fetch will not send: a body shorter than its
 * content-length, a chunked body). Resolves with whatever the server answered when the socket closes.
 */
function raw(head: string, chunks: Buffer[], finish: 'end' | 'destroy' | 'wait'): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(server.port, '127.0.0.1');
    const received: Buffer[] = [];
    const done = () => resolve(Buffer.concat(received).toString('utf8'));
    socket.on('data', (d: Buffer) => received.push(d));
    socket.on('close', done);
    socket.on('error', done);
    socket.on('connect', () => {
      socket.write(Buffer.concat([Buffer.from(head.replace(/\n/g, '\r\n')), ...chunks]));
      if (finish === 'end') socket.end();
      if (finish === 'destroy') socket.destroy();
    });
  });
}

const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0);

function headLines(headers: Record<string, string | number>): string {
  return `${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\n`)
    .join('')}\n`;
}

describe('ingress: accepted deliveries are stored before the answer', () => {
  it('a valid issues.opened is answered 202 accepted and is in the inbox as sent', async () => {
    const id = randomUUID();
    const before = totalRows();
    const r = await send({ delivery: id });
    expect(r).toMatchObject({ status: 202, text: 'accepted' });
    const record = await inbox.get(id);
    expect(record).toMatchObject({
      id,
      source: 'github',
      event: 'issues',
      action: 'opened',
      status: 'queued',
    });
    expect(await inbox.body(id)).toBe(ISSUE_OPENED);
    expect(totalRows()).toBe(before + 1);
    expect(timesAccepted(id)).toBe(1);
  });

  it('UTF-8 bodies are stored byte for byte (the fixture’s non-ASCII dash)', async () => {
    const id = randomUUID();
    expect(COMMENT).toContain('—');
    expect((await send({ delivery: id, event: 'issue_comment', body: COMMENT })).status).toBe(202);
    expect(await inbox.body(id)).toBe(COMMENT);
    expect(await inbox.get(id)).toMatchObject({ event: 'issue_comment', action: 'created' });
  });

  it('a body is stored as the bytes sent, invalid UTF-8 included, and reads back as it decodes', async () => {
    const id = randomUUID();
    // A lone 0xff and a cut-off 3-byte sequence inside a JSON string: decoded, each is U+FFFD.
    const bytes = Buffer.concat([
      Buffer.from('{"action":"opened","title":"a'),
      Buffer.from([0xff, 0xe2, 0x82]),
      Buffer.from('b \\u0000 \\ud800"}'),
    ]);
    expect((await send({ delivery: id, body: bytes })).status).toBe(202);
    const stored = db.prepare('SELECT body FROM deliveries WHERE id = ?').get(id) as { body: Buffer };
    expect(Buffer.isBuffer(stored.body)).toBe(true);
    expect(stored.body.equals(bytes)).toBe(true);
    expect(await inbox.body(id)).toBe(bytes.toString('utf8'));
    expect(JSON.parse((await inbox.body(id)) ?? '')).toMatchObject({
      title: 'a\ufffd\ufffdb \u0000 \ud800',
    });
  });

  it('a content type with parameters is accepted', async () => {
    const id = randomUUID();
    const r = await send({ delivery: id, contentType: 'application/json; charset=utf-8' });
    expect(r.status).toBe(202);
    expect(rows(id)).toBe(1);
  });

  it('the same delivery id again is 200 duplicate and stays one row, handled once', async () => {
    const id = randomUUID();
    expect((await send({ delivery: id })).status).toBe(202);
    const again = await send({ delivery: id });
    expect(again).toMatchObject({ status: 200, text: 'duplicate' });
    // A redelivery with another body does not replace what was stored.
    const other = await send({ delivery: id, event: 'issue_comment', body: COMMENT });
    expect(other).toMatchObject({ status: 200, text: 'duplicate' });
    expect(rows(id)).toBe(1);
    expect(await inbox.body(id)).toBe(ISSUE_OPENED);
    expect(timesAccepted(id)).toBe(1);
  });

  it('20 concurrent requests with one delivery id: one 202, nineteen 200 duplicate, one row', async () => {
    const id = randomUUID();
    const answers = await Promise.all(Array.from({ length: 20 }, () => send({ delivery: id })));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(19);
    expect(answers.filter((a) => a.status === 200).every((a) => a.text === 'duplicate')).toBe(true);
    expect(rows(id)).toBe(1);
    expect(timesAccepted(id)).toBe(1);
  });

  it('concurrent distinct deliveries are each stored once', async () => {
    const ids = Array.from({ length: 20 }, () => randomUUID());
    const answers = await Promise.all(ids.map((id) => send({ delivery: id })));
    expect(answers.every((a) => a.status === 202)).toBe(true);
    for (const id of ids) {
      expect(rows(id)).toBe(1);
      expect(timesAccepted(id)).toBe(1);
    }
  });

  it('a form-encoded payload= signed over the form bytes is accepted and stored as its JSON', async () => {
    const id = randomUUID();
    const form = `payload=${encodeURIComponent(COMMENT)}`;
    const r = await send({
      delivery: id,
      event: 'issue_comment',
      body: form,
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(r.status).toBe(202);
    expect(await inbox.body(id)).toBe(COMMENT);
    expect(JSON.parse((await inbox.body(id)) ?? 'null')).toEqual(JSON.parse(COMMENT));
    expect(await inbox.get(id)).toMatchObject({ event: 'issue_comment', action: 'created' });
  });

  it('a form signed over its JSON instead of the form bytes is 401', async () => {
    const id = randomUUID();
    const r = await send({
      delivery: id,
      body: `payload=${encodeURIComponent(ISSUE_OPENED)}`,
      contentType: 'application/x-www-form-urlencoded',
      signature: signBody(SECRET, ISSUE_OPENED),
    });
    expect(r.status).toBe(401);
    expect(rows(id)).toBe(0);
  });

  it('a form without payload= is 400 and not stored', async () => {
    const id = randomUUID();
    const r = await send({ delivery: id, body: 'other=1', contentType: 'application/x-www-form-urlencoded' });
    expect(r.status).toBe(400);
    expect(rows(id)).toBe(0);
  });

  it('a body of exactly the limit is accepted', async () => {
    const id = randomUUID();
    const payload = JSON.parse(COMMENT) as Record<string, unknown>;
    payload.padding = '';
    const pad = LIMIT - Buffer.byteLength(JSON.stringify(payload));
    payload.padding = 'p'.repeat(pad);
    const body = JSON.stringify(payload);
    expect(Buffer.byteLength(body)).toBe(LIMIT);
    expect((await send({ delivery: id, event: 'issue_comment', body })).status).toBe(202);
    expect(await inbox.body(id)).toBe(body);
  });

  it('ping is answered 200 pong and not stored', async () => {
    const id = randomUUID();
    const before = totalRows();
    const r = await send({ delivery: id, event: 'ping', body: PING });
    expect(r).toMatchObject({ status: 200, text: 'pong' });
    expect(rows(id)).toBe(0);
    expect(totalRows()).toBe(before);
    expect(timesAccepted(id)).toBe(0);
  });
});

describe('ingress: each delivery is routed once, on arrival, and stored with its route', () => {
  it('stores the route, work item and plan (the rendered prompt) with the body', async () => {
    const id = randomUUID();
    expect((await send({ delivery: id, event: 'issue_comment', body: COMMENT })).status).toBe(202);
    expect(await inbox.get(id)).toMatchObject({
      status: 'queued',
      route: 'deliver',
      workItem: 'github:octo/widgets#15',
      reason: null,
      heldReason: null,
    });
    expect(await inbox.plan(id)).toMatchObject({
      action: 'deliver',
      workItem: 'github:octo/widgets#15',
      prompt: 'a prompt for issue_comment',
      repoPath: '/repos/widgets',
    });
  });

  it('a redelivery, one after the other or twenty at once, is not routed again', async () => {
    const id = randomUUID();
    const before = routedCalls.length;
    expect((await send({ delivery: id })).status).toBe(202);
    expect(routedCalls.length).toBe(before + 1);
    expect((await send({ delivery: id })).status).toBe(200);
    const other = randomUUID();
    const twenty = await Promise.all(Array.from({ length: 20 }, () => send({ delivery: other })));
    expect(twenty.map((a) => a.status).sort()).toEqual([...Array(19).fill(200), 202]);
    // One call for the first delivery, one for the twenty copies of the other.
    expect(routedCalls.length).toBe(before + 2);
  });

  it('a router that throws: the delivery is stored rejected, with the reason, and answered 202', async () => {
    const id = randomUUID();
    const body = JSON.stringify({ ...(JSON.parse(COMMENT) as object), explode: true });
    expect((await send({ delivery: id, event: 'issue_comment', body })).status).toBe(202);
    expect(await inbox.get(id)).toMatchObject({ status: 'rejected', route: 'reject' });
    expect((await inbox.get(id))?.reason).toBe('routing failed: the router broke');
    expect(await inbox.body(id)).toBe(body);
    expect(await inbox.plan(id)).toBeUndefined();
    // Settled as stored: nothing for the dispatcher.
    expect(timesAccepted(id)).toBe(0);
  });

  it('deliveries routed to ignore are stored settled and answered 202, without waking the dispatcher', async () => {
    const settled = JSON.stringify({ ...(JSON.parse(ISSUE_OPENED) as object), settle: true });
    const quiet = Array.from({ length: 10 }, () => randomUUID());
    const queued = Array.from({ length: 10 }, () => randomUUID());
    // Both kinds in flight at once: committed in the same groups, each handed on as its route says.
    const answers = await Promise.all([
      ...quiet.map((id) => send({ delivery: id, body: settled })),
      ...queued.map((id) => send({ delivery: id })),
    ]);
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(202));
    for (const id of quiet) {
      expect(await inbox.get(id)).toMatchObject({
        status: 'ignored',
        route: 'ignore',
        reason: 'nothing to do',
      });
      expect(await inbox.body(id)).toBe(settled);
      expect(timesAccepted(id)).toBe(0);
    }
    for (const id of queued) {
      expect(await inbox.get(id)).toMatchObject({ status: 'queued', route: 'start' });
      expect(timesAccepted(id)).toBe(1);
    }
    // A redelivery of a settled one is a duplicate, and still hands nothing on.
    expect((await send({ delivery: quiet[0] as string, body: settled })).status).toBe(200);
    expect(timesAccepted(quiet[0] as string)).toBe(0);
  });
});

describe('ingress: refusals, each with its status, nothing stored', () => {
  /** Send, expect the status, and check that nothing was stored or handed on. */
  async function refused(options: Sent, status: number): Promise<Answer> {
    const id = typeof options.delivery === 'string' ? options.delivery : randomUUID();
    const before = totalRows();
    const r = await send({ delivery: id, ...options });
    expect(r.status).toBe(status);
    expect(r.text.length).toBeGreaterThan(0);
    expect(r.text).not.toContain('\n');
    expect(rows(id)).toBe(0);
    expect(totalRows()).toBe(before);
    expect(timesAccepted(id)).toBe(0);
    return r;
  }

  it('a signature made with the wrong secret is 401', async () => {
    const r = await refused({ signature: signBody('not-the-secret-at-all', ISSUE_OPENED) }, 401);
    expect(r.text).toContain('signature');
  });

  it('a missing signature is 401', async () => {
    await refused({ signature: null }, 401);
  });

  it.each([
    ['sha1', `sha1=${'a'.repeat(40)}`],
    ['no prefix', signBody(SECRET, ISSUE_OPENED).slice('sha256='.length)],
    ['short', 'sha256=abc'],
    ['non-hex', `sha256=${'z'.repeat(64)}`],
    ['empty', ''],
  ])('a malformed signature header (%s) is 401', async (_label, signature) => {
    await refused({ signature }, 401);
  });

  it('the signature of other bytes (the pretty-printed fixture) is 401', async () => {
    const pretty = readFileSync(new URL('../fixtures/github/issues.opened.json', import.meta.url), 'utf8');
    await refused({ signature: signBody(SECRET, pretty) }, 401);
  });

  it('a ping with a bad signature is 401, not pong', async () => {
    await refused({ event: 'ping', body: PING, signature: signBody('wrong-secret-wrong', PING) }, 401);
  });

  it('verification comes before parsing: unsigned garbage is 401, not 400', async () => {
    await refused({ body: '{not json', signature: signBody('wrong-secret-wrong', '{not json') }, 401);
  });

  it('GET is 405 with Allow: POST', async () => {
    const r = await refused({ method: 'GET' }, 405);
    expect(r.headers.get('allow')).toBe('POST');
  });

  it('PUT is 405 too', async () => {
    const r = await refused({ method: 'PUT' }, 405);
    expect(r.headers.get('allow')).toBe('POST');
  });

  it.each([['text/plain'], ['application/xml'], ['multipart/form-data; boundary=x']])(
    'content type %s is 415',
    async (contentType) => {
      await refused({ contentType }, 415);
    },
  );

  it('no content type is 415', async () => {
    await refused({ contentType: null }, 415);
  });

  it('a missing X-GitHub-Event is 400', async () => {
    const r = await refused({ event: null }, 400);
    expect(r.text).toContain('X-GitHub-Event');
  });

  it.each([['Issues'], ['issues;rm -rf'], ['../issues'], ['x'.repeat(65)]])(
    'an invalid X-GitHub-Event %j is 400',
    async (event) => {
      await refused({ event }, 400);
    },
  );

  it('a missing X-GitHub-Delivery is 400', async () => {
    const before = totalRows();
    const r = await send({ delivery: null });
    expect(r.status).toBe(400);
    expect(r.text).toContain('X-GitHub-Delivery');
    expect(totalRows()).toBe(before);
  });

  it.each([
    ['with spaces', 'a b c'],
    ['200 characters', 'a'.repeat(200)],
    ['101 characters', 'a'.repeat(101)],
    ['path tricks', '../../etc/passwd'],
    ['quotes', "x';DROP TABLE deliveries;--"],
    ['empty', ''],
  ])('an invalid X-GitHub-Delivery (%s) is 400', async (_label, delivery) => {
    const r = await refused({ delivery }, 400);
    expect(r.text).toContain('X-GitHub-Delivery');
  });

  it('invalid JSON, validly signed, is 400', async () => {
    const r = await refused({ body: '{"action": "opened",' }, 400);
    expect(r.text).toContain('JSON');
  });

  it.each([['[]'], ['[{"action":"opened"}]'], ['null'], ['"issues"'], ['15'], ['true']])(
    'valid JSON that is not an object (%s), validly signed, is 400',
    async (body) => {
      await refused({ body }, 400);
    },
  );

  it('an empty body, validly signed, is 400', async () => {
    await refused({ body: '' }, 400);
  });

  it('a body declared over the limit is 413 without being read', async () => {
    const id = randomUUID();
    const body = Buffer.alloc(10 * 1024 * 1024, 0x20);
    // Headers only: the server must answer from content-length alone.
    const head = `POST ${PATH} HTTP/1.1\nhost: 127.0.0.1\n${headLines({
      'content-type': 'application/json',
      'x-github-event': 'issues',
      'x-github-delivery': id,
      'x-hub-signature-256': signBody(SECRET, body),
      'content-length': body.length,
    })}`;
    const response = await raw(head, [], 'wait');
    expect(statusOf(response)).toBe(413);
    expect(rows(id)).toBe(0);
    expect(timesAccepted(id)).toBe(0);
  });

  it('a body one byte over the limit is 413 (fetch, content-length)', async () => {
    const id = randomUUID();
    const payload = JSON.parse(COMMENT) as Record<string, unknown>;
    payload.padding = '';
    payload.padding = 'p'.repeat(LIMIT + 1 - Buffer.byteLength(JSON.stringify(payload)));
    const body = JSON.stringify(payload);
    expect(Buffer.byteLength(body)).toBe(LIMIT + 1);
    const r = await send({ delivery: id, body, event: 'issue_comment' });
    expect(r.status).toBe(413);
    expect(rows(id)).toBe(0);
  });

  it('a chunked body without content-length that grows over the limit is 413', async () => {
    const id = randomUUID();
    const data = Buffer.from(JSON.stringify({ action: 'opened', padding: 'x'.repeat(LIMIT + 16 * 1024) }));
    const chunks: Buffer[] = [];
    for (let at = 0; at < data.length; at += 8192) {
      const part = data.subarray(at, at + 8192);
      chunks.push(Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n'));
    }
    chunks.push(Buffer.from('0\r\n\r\n'));
    const head = `POST ${PATH} HTTP/1.1\nhost: 127.0.0.1\n${headLines({
      'content-type': 'application/json',
      'x-github-event': 'issues',
      'x-github-delivery': id,
      'x-hub-signature-256': signBody(SECRET, data),
      'transfer-encoding': 'chunked',
    })}`;
    const response = await raw(head, chunks, 'wait');
    expect(statusOf(response)).toBe(413);
    expect(rows(id)).toBe(0);
    expect(timesAccepted(id)).toBe(0);
  });

  it('a small chunked body, validly signed, is accepted', async () => {
    const id = randomUUID();
    const data = Buffer.from(ISSUE_OPENED);
    const head = `POST ${PATH} HTTP/1.1\nhost: 127.0.0.1\nconnection: close\n${headLines({
      'content-type': 'application/json',
      'x-github-event': 'issues',
      'x-github-delivery': id,
      'x-hub-signature-256': signBody(SECRET, data),
      'transfer-encoding': 'chunked',
    })}`;
    const response = await raw(
      head,
      [Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n0\r\n\r\n')],
      'wait',
    );
    expect(statusOf(response)).toBe(202);
    expect(await inbox.body(id)).toBe(ISSUE_OPENED);
  });

  it.each([['end' as const], ['destroy' as const]])(
    'a truncated body (socket %s before content-length bytes) stores nothing; a full redelivery is then accepted',
    async (finish) => {
      const id = randomUUID();
      const data = Buffer.from(ISSUE_OPENED);
      const head = `POST ${PATH} HTTP/1.1\nhost: 127.0.0.1\n${headLines({
        'content-type': 'application/json',
        'x-github-event': 'issues',
        'x-github-delivery': id,
        'x-hub-signature-256': signBody(SECRET, data),
        'content-length': data.length,
      })}`;
      await raw(head, [data.subarray(0, data.length >> 1)], finish);
      // The server saw the request end early (it logs it); only then is "nothing stored" meaningful.
      await vi.waitFor(
        () => {
          expect(sink.lines.some((l) => l.includes('aborted') && l.includes(id))).toBe(true);
        },
        { timeout: 5000, interval: 20 },
      );
      expect(rows(id)).toBe(0);
      expect(timesAccepted(id)).toBe(0);
      // GitHub redelivers with the same id: that must not be mistaken for a duplicate.
      expect((await send({ delivery: id })).status).toBe(202);
      expect(await inbox.body(id)).toBe(ISSUE_OPENED);
      expect(timesAccepted(id)).toBe(1);
    },
  );

  it.each([['/'], ['/gh-webhook/'], ['/gh-webhook/x'], ['/GH-WEBHOOK'], ['/healthz']])(
    'unknown path %s is 404',
    async (path) => {
      await refused({ path }, 404);
    },
  );

  it('a query string does not change the route', async () => {
    const id = randomUUID();
    expect((await send({ delivery: id, path: `${PATH}?x=1` })).status).toBe(202);
    expect(rows(id)).toBe(1);
  });
});

describe('ingress: an inbox that cannot store', () => {
  it('answers 503, never 202, and hands nothing on', async () => {
    const broken = openDb(join(dir, 'broken.sqlite'));
    const brokenInbox = new SqliteInbox(broken);
    broken.close();
    const handedOn: string[] = [];
    const other = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      logger: nullLogger,
      routes: {
        [PATH]: createIngressHandler({
          secret: SECRET,
          maxBodyBytes: LIMIT,
          inbox: brokenInbox,
          logger: nullLogger,
          onAccepted: (id) => handedOn.push(id),
          route,
        }),
      },
    });
    try {
      const bytes = Buffer.from(ISSUE_OPENED);
      const res = await fetch(`${other.url}${PATH}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'issues',
          'x-github-delivery': randomUUID(),
          'x-hub-signature-256': signBody(SECRET, bytes),
        },
        body: new Uint8Array(bytes),
      });
      expect(res.status).toBe(503);
      expect(handedOn).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

describe('ingress: logs', () => {
  it('no log line carries the webhook secret', () => {
    expect(sink.lines.length).toBeGreaterThan(0);
    expect(sink.lines.some((l) => l.includes(SECRET))).toBe(false);
  });
});
