import { createServer, request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createModelHandler } from '../../../src/gateway/models/model-proxy.js';
import type { MockApi } from '../../fixtures/mock-apis/types.js';
import { ANTHROPIC, type ApiCase, CASES, GEMINI, OPENAI, recordDirect, USAGE } from '../model-requests.js';
import {
  type FakePorts,
  fakePorts,
  type Listening,
  listen,
  REAL_KEY,
  startStub,
  TOKEN,
} from '../model-stub.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Rig {
  ports: FakePorts;
  gw: Listening;
  base: string;
}

/** The stub gateway in front of `upstream`, with the real key held for `c.api`. */
async function rig(
  c: ApiCase,
  upstream: string,
  options = {},
  credential: string | null = REAL_KEY,
): Promise<Rig> {
  const ports = fakePorts({
    api: c.api,
    upstream,
    credential: credential === null ? undefined : { value: credential, kind: 'api-key' },
  });
  const handler = createModelHandler(options);
  cleanups.push(async () => handler.close());
  const gw = await startStub(handler, ports);
  cleanups.push(() => gw.close());
  return { ports, gw, base: `${gw.url}/m/${TOKEN}` };
}

async function mockFor(
  c: ApiCase,
  script = [{ kind: 'text' as const, text: 'Hello through the gateway.', usage: USAGE }],
) {
  const mock = await c.start({ script });
  cleanups.push(() => mock.close());
  return mock;
}

async function send(url: string, r: { method: string; headers: Record<string, string>; body: string }) {
  const res = await fetch(url, { method: r.method, headers: r.headers, body: r.body });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** Nothing in the mock's record, nor in any log line, holds the capability token (or the real key, for logs). */
function expectNoLeak(mock: MockApi | undefined, ports: FakePorts): void {
  if (mock) expect(JSON.stringify(mock.requests)).not.toContain(TOKEN);
  const logs = ports.logs.join('\n');
  expect(logs).not.toContain(TOKEN);
  expect(logs).not.toContain(REAL_KEY);
}

describe.each(CASES.map((c) => [c.api, c] as const))('%s through the gateway', (_, c) => {
  it('streams a turn to the real mock with the real key, and records the usage it reported', async () => {
    const mock = await mockFor(c);
    const { ports, base } = await rig(c, c.upstream(mock));
    const r = c.request(TOKEN, true);
    const res = await send(base + r.path, r);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.bytes.toString()).toContain('Hello through');
    const [seen] = mock.requests;
    expect(c.keySeen(seen?.headers ?? {}, seen?.path ?? '')).toBe(REAL_KEY);
    expect(seen?.body).toEqual(JSON.parse(r.body));
    expect(seen?.headers['accept-encoding']).toBe('identity');
    expect(ports.rows).toEqual([
      expect.objectContaining({ api: c.api, partial: false, usage: c.expected(mock.reported) }),
    ]);
    expect(ports.rows[0]?.responseId).toBeTruthy();
    expect(ports.budgetChecks).toBe(1);
    expectNoLeak(mock, ports);
  });

  it('hands the client the exact bytes the upstream sent', async () => {
    const recorded = await recordDirect(c, true);
    // A replay of a real mock answer, written in pieces: the same bytes direct and through us.
    const replay = await listen(
      createServer((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': recorded.contentType });
        const third = Math.ceil(recorded.bytes.length / 3);
        res.write(recorded.bytes.subarray(0, third));
        setImmediate(() => {
          res.write(recorded.bytes.subarray(third, 2 * third));
          res.end(recorded.bytes.subarray(2 * third));
        });
      }),
    );
    cleanups.push(() => replay.close());
    const upstream = c === OPENAI ? `${replay.url}/v1` : replay.url;
    const { ports, base } = await rig(c, upstream);
    const r = c.request(TOKEN, true);
    const direct = await send(upstream + r.path, c.request('direct', true));
    const through = await send(base + r.path, r);
    expect(through.bytes.equals(direct.bytes)).toBe(true);
    expect(through.bytes.equals(recorded.bytes)).toBe(true);
    expect(ports.rows.map((u) => u.usage)).toEqual([c.expected(recorded.reported)]);
  });

  it('over budget: refuses in the vendor shape, forwards nothing, records nothing', async () => {
    const mock = await mockFor(c);
    const { ports, base } = await rig(c, c.upstream(mock));
    ports.over = 'session over its token budget (1200 of 1000)';
    const r = c.request(TOKEN, true);
    const res = await send(base + r.path, r);
    const body = JSON.parse(res.bytes.toString()) as Record<string, Record<string, unknown>>;
    const message = '[the-loop budget] session over its token budget (1200 of 1000)';
    if (c === ANTHROPIC) {
      expect(res.status).toBe(403);
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect(body).toEqual({ type: 'error', error: { type: 'permission_error', message } });
    } else if (c === OPENAI) {
      expect(res.status).toBe(400);
      expect(body).toEqual({
        error: { message, type: 'insufficient_quota', param: null, code: 'insufficient_quota' },
      });
    } else {
      expect(res.status).toBe(403);
      expect(body).toEqual({ error: { code: 403, message, status: 'PERMISSION_DENIED' } });
    }
    expect(mock.requests).toEqual([]);
    expect(ports.rows).toEqual([]);
    expectNoLeak(mock, ports);
  });
});

describe('the model proxy', () => {
  it('over budget with a long conversation in the body: the refusal arrives whole, not a reset', async () => {
    const mock = await mockFor(ANTHROPIC);
    const { ports, base } = await rig(ANTHROPIC, mock.url);
    ports.over = 'over';
    const r = ANTHROPIC.request(TOKEN, true);
    const body = JSON.stringify({
      ...JSON.parse(r.body),
      messages: [{ role: 'user', content: 'x'.repeat(8 << 20) }],
    });
    for (let i = 0; i < 3; i++) {
      const res = await send(base + r.path, { ...r, body });
      expect(res.status).toBe(403);
      expect(JSON.parse(res.bytes.toString())).toMatchObject({ error: { type: 'permission_error' } });
    }
    expect(mock.requests).toEqual([]);
  });

  it('answers the HEAD reachability check itself, forwarding nothing', async () => {
    const mock = await mockFor(ANTHROPIC);
    const { ports, gw } = await rig(ANTHROPIC, mock.url);
    const res = await fetch(`${gw.url}/m/${TOKEN}`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(mock.requests).toEqual([]);
    expect(ports.budgetChecks).toBe(0);
  });

  it('records a non-stream answer, and relays reads (model lists) without a budget check', async () => {
    const mock = await mockFor(ANTHROPIC);
    const { ports, base } = await rig(ANTHROPIC, mock.url);
    const res = await send(`${base}/v1/messages`, ANTHROPIC.request(TOKEN, false));
    expect(JSON.parse(res.bytes.toString())).toMatchObject({ type: 'message' });
    expect(ports.rows).toEqual([
      expect.objectContaining({ partial: false, usage: ANTHROPIC.expected(mock.reported) }),
    ]);
    const openai = await mockFor(OPENAI);
    const o = await rig(OPENAI, OPENAI.upstream(openai));
    o.ports.over = 'over';
    const list = await fetch(`${o.gw.url}/m/_/models`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(((await list.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0);
    expect(openai.requests.map((q) => [q.method, q.path, q.headers.authorization])).toEqual([
      ['GET', '/v1/models', `Bearer ${REAL_KEY}`],
    ]);
    expect(o.ports.budgetChecks).toBe(0);
  });

  it('puts the real key in the `key` query parameter where the client put the token there', async () => {
    const mock = await mockFor(GEMINI);
    const { ports, gw } = await rig(GEMINI, mock.url);
    const r = GEMINI.request(TOKEN, true);
    const { 'x-goog-api-key': _, ...headers } = r.headers;
    const res = await send(`${gw.url}/m/_${r.path}&key=${TOKEN}`, { ...r, headers });
    expect(res.status).toBe(200);
    expect(mock.requests[0]?.path).toBe(
      `/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key=${REAL_KEY}`,
    );
    expect(ports.rows).toHaveLength(1);
    expectNoLeak(mock, ports);
  });

  it('without a held credential, removes the token and lets the engine’s own login pass unchanged', async () => {
    const mock = await mockFor(ANTHROPIC, [
      { kind: 'text', text: 'one', usage: USAGE },
      { kind: 'text', text: 'two', usage: USAGE },
    ]);
    const { ports, base } = await rig(ANTHROPIC, mock.url, {}, null);
    const r = ANTHROPIC.request(TOKEN, true);
    await send(base + r.path, r);
    const { 'x-api-key': _, ...rest } = r.headers;
    await send(base + r.path, {
      ...r,
      headers: { ...rest, authorization: 'Bearer sk-ant-oat01-subscription' },
    });
    expect(mock.requests.map((q) => [q.headers['x-api-key'], q.headers.authorization])).toEqual([
      [undefined, undefined],
      [undefined, 'Bearer sk-ant-oat01-subscription'],
    ]);
    expect(ports.rows).toHaveLength(2);
    expectNoLeak(mock, ports);
  });

  it('answers 404 in the vendor shape for no route, or a path that leaves the upstream base; refuses one off the allow-list', async () => {
    const mock = await mockFor(OPENAI);
    const { ports, gw } = await rig(OPENAI, OPENAI.upstream(mock));
    const escaped = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      // Raw path: a URL object would resolve the dot segments before sending.
      const { hostname, port } = new URL(gw.url);
      const path = `/m/${TOKEN}/%2e%2e/admin`;
      const req = request({ hostname, port, path, method: 'POST' }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end('{}');
    });
    expect(escaped.status).toBe(404);
    expect(JSON.parse(escaped.body)).toMatchObject({
      error: { type: 'invalid_request_error', code: 'not_found' },
    });
    // A path under the base but off the allow-list: refused here, never forwarded (model-proxy-deny).
    const unknown = await send(`${gw.url}/m/${TOKEN}/nope`, { method: 'POST', headers: {}, body: '{}' });
    expect(unknown.status).toBe(400);
    expect(JSON.parse(unknown.bytes.toString()).error.message).toMatch(
      /^\[the-loop gateway\] POST \/nope is not allowed through the gateway/,
    );
    expect(mock.requests).toEqual([]);
    ports.route = undefined;
    const none = await send(`${gw.url}/m/${TOKEN}/v1/messages`, ANTHROPIC.request(TOKEN, true));
    expect(none.status).toBe(404);
    expect(JSON.parse(none.bytes.toString())).toMatchObject({
      type: 'error',
      error: { type: 'not_found_error' },
    });
    expect(ports.rows).toEqual([]);
  });

  it('refuses a request body over the bound with 413, declared or streamed', async () => {
    const mock = await mockFor(ANTHROPIC);
    const { ports, base } = await rig(ANTHROPIC, mock.url, { maxRequestBytes: 1024 });
    const r = ANTHROPIC.request(TOKEN, true);
    const big = JSON.stringify({ pad: 'x'.repeat(4096) });
    const declared = await send(base + r.path, { ...r, body: big });
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.bytes.toString())).toMatchObject({ error: { type: 'request_too_large' } });
    expect(mock.requests).toEqual([]);
    const body = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 8; i++) controller.enqueue(new TextEncoder().encode('x'.repeat(512)));
        controller.close();
      },
    });
    const streamed = await fetch(base + r.path, {
      method: 'POST',
      headers: r.headers,
      body,
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(ports.rows).toEqual([]);
  });
});
