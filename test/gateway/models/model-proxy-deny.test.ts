/**
 * Default deny at the model proxy: a request off the allow-list (allow-list.ts) is refused in the
 * vendor's shape, never reaches the upstream, costs no budget check, and is logged by its path
 * without the query; a Responses request asking for a background response is refused the same way.
 */
import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { createModelHandler, type ModelProxyOptions } from '../../../src/gateway/models/model-proxy.js';
import type { ModelApi } from '../../../src/gateway/types.js';
import { ANTHROPIC, type ApiCase, CASES, GEMINI, OPENAI, USAGE } from '../model-requests.js';
import { fakePorts, REAL_KEY, startStub, TOKEN } from '../model-stub.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function rig(c: ApiCase, options: ModelProxyOptions = {}, upstreamOf = c.upstream) {
  const mock = await c.start({
    script: [{ kind: 'text', text: 'Hello through the gateway.', usage: USAGE }],
  });
  cleanups.push(() => mock.close());
  const ports = fakePorts({
    api: c.api,
    upstream: upstreamOf(mock),
    credential: { value: REAL_KEY, kind: 'api-key' },
  });
  const handler = createModelHandler(options);
  cleanups.push(async () => handler.close());
  const gw = await startStub(handler, ports);
  cleanups.push(() => gw.close());
  return { mock, ports, base: `${gw.url}/m/${TOKEN}` };
}

/** A raw request (a URL object would resolve dot segments before sending). */
function raw(
  base: string,
  path: string,
  method: string,
  headers: Record<string, string>,
  body?: string | Buffer,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const { hostname, port, pathname } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path: pathname + path, method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const STATUS: Record<ModelApi, number> = { anthropic: 403, openai: 400, gemini: 403 };

/** The vendor's shape and our message, as the CLI shows it. */
function expectRefusal(
  api: ModelApi,
  res: { status: number; headers: Record<string, unknown>; body: string },
) {
  expect(res.status).toBe(STATUS[api]);
  const body = JSON.parse(res.body) as { error: Record<string, unknown>; type?: string };
  if (api === 'anthropic') {
    expect(body.type).toBe('error');
    expect(body.error.type).toBe('permission_error');
    expect(res.headers['x-should-retry']).toBe('false');
  } else if (api === 'openai') {
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'not_allowed', param: null });
  } else expect(body.error).toMatchObject({ code: 403, status: 'PERMISSION_DENIED' });
  return String(body.error.message);
}

const REFUSED: Array<[ApiCase, string, string]> = [
  [ANTHROPIC, 'POST', '/v1/messages/batches?beta=true'],
  [ANTHROPIC, 'GET', '/v1/messages/batches/msgbatch_1/results'],
  [ANTHROPIC, 'POST', '/v1/files'],
  [ANTHROPIC, 'POST', '/v1/complete'],
  [ANTHROPIC, 'POST', '/v1/messages/../messages/batches'],
  [ANTHROPIC, 'HEAD', '/v1/files'],
  [OPENAI, 'POST', '/batches'],
  [OPENAI, 'POST', '/v1/batches'],
  [OPENAI, 'POST', '/fine_tuning/jobs'],
  [OPENAI, 'POST', '/images/generations'],
  [OPENAI, 'POST', '/files'],
  [OPENAI, 'POST', '/chat/completions'],
  [OPENAI, 'GET', '/responses/resp_1'],
  [OPENAI, 'POST', '/nope'],
  [GEMINI, 'POST', '/v1beta/models/gemini-2.5-pro:batchGenerateContent'],
  [GEMINI, 'POST', '/v1beta/models/gemini-2.5-pro:embedContent'],
  [GEMINI, 'POST', '/v1beta/tunedModels'],
  [GEMINI, 'POST', '/v1beta/cachedContents'],
  [GEMINI, 'POST', '/upload/v1beta/files?uploadType=resumable'],
  [GEMINI, 'POST', '/v1internal:generateContent'],
];

describe('paths off the allow-list', () => {
  it.each(REFUSED.map(([c, m, p]) => [c.api, m, p, c] as const))(
    '%s %s %s: refused in the vendor shape, nothing forwarded, logged without the query',
    async (api, method, path, c) => {
      const { mock, ports, base } = await rig(c);
      const r = c.request(TOKEN, true);
      const withKey = `${path}${path.includes('?') ? '&' : '?'}key=secret-in-query`;
      const body = method === 'GET' || method === 'HEAD' ? undefined : r.body;
      const res = await raw(base, withKey, method, r.headers, body);
      const shown = new URL(`http://x${path}`).pathname;
      if (method === 'HEAD') expect(res.status).toBe(STATUS[api]);
      else
        expect(expectRefusal(api, res)).toBe(
          `[the-loop gateway] ${method} ${shown} is not allowed through the gateway: only model requests, token counts and model lists pass`,
        );
      expect(mock.requests).toEqual([]);
      expect(ports.budgetChecks).toBe(0);
      expect(ports.rows).toEqual([]);
      const logs = ports.logs.join('\n');
      expect(logs).toContain('model request refused at the gateway: not allowed');
      expect(logs).toContain(`"path":"${shown}"`);
      expect(logs).not.toContain('secret-in-query');
      expect(logs).not.toContain(TOKEN);
    },
  );

  it('a refused request with a body over the bound: refused, and the connection is closed', async () => {
    const { mock, base } = await rig(ANTHROPIC, { maxRequestBytes: 1024 });
    const r = ANTHROPIC.request(TOKEN, true);
    const res = await raw(base, '/v1/messages/batches', 'POST', r.headers, 'x'.repeat(4096));
    expectRefusal('anthropic', res);
    expect(res.headers.connection).toBe('close');
    expect(mock.requests).toEqual([]);
  });

  it('the token put in the path is redacted from the message and the log', async () => {
    const { mock, ports, base } = await rig(OPENAI);
    const res = await raw(base, `/files/${TOKEN}`, 'POST', OPENAI.request(TOKEN, true).headers, '{}');
    expect(expectRefusal('openai', res)).toContain('POST /files/<token> is not allowed');
    expect(res.body).not.toContain(TOKEN);
    expect(ports.logs.join('\n')).not.toContain(TOKEN);
    expect(mock.requests).toEqual([]);
  });
});

describe('what the CLIs send passes', () => {
  it.each(CASES.map((c) => [c.api, c] as const))(
    '%s: the model turn is forwarded and metered',
    async (_, c) => {
      const { mock, ports, base } = await rig(c);
      const r = c.request(TOKEN, true);
      const res = await raw(base, r.path, r.method, r.headers, r.body);
      expect(res.status).toBe(200);
      expect(mock.requests).toHaveLength(1);
      expect(ports.rows).toHaveLength(1);
    },
  );

  it('anthropic: count_tokens and the model list reach the upstream', async () => {
    const { mock, base } = await rig(ANTHROPIC);
    const r = ANTHROPIC.request(TOKEN, false);
    const count = await raw(base, '/v1/messages/count_tokens?beta=true', 'POST', r.headers, r.body);
    expect(JSON.parse(count.body)).toMatchObject({ input_tokens: expect.any(Number) });
    // The mock has no model list: its own 404, relayed, shows the request went through.
    await raw(base, '/v1/models?limit=1000', 'GET', r.headers);
    expect(mock.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'POST /v1/messages/count_tokens?beta=true',
      'GET /v1/models?limit=1000',
    ]);
  });

  it('openai: /v1/responses when the upstream base does not end in /v1', async () => {
    const { mock, ports, base } = await rig(OPENAI, {}, (m) => m.url);
    const r = OPENAI.request(TOKEN, true);
    const res = await raw(base, '/v1/responses', 'POST', r.headers, r.body);
    expect(res.status).toBe(200);
    expect(mock.requests.map((q) => q.path)).toEqual(['/v1/responses']);
    expect(ports.rows).toHaveLength(1);
  });

  it('gemini: countTokens and the model list reach the upstream', async () => {
    const { mock, base } = await rig(GEMINI);
    const r = GEMINI.request(TOKEN, true);
    await raw(base, '/v1beta/models/gemini-2.5-pro:countTokens', 'POST', r.headers, r.body);
    await raw(base, '/v1beta/models', 'GET', r.headers);
    expect(mock.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'POST /v1beta/models/gemini-2.5-pro:countTokens',
      'GET /v1beta/models',
    ]);
  });
});

describe('Responses requests: the body is read whole and checked', () => {
  const r = OPENAI.request(TOKEN, true);
  const withBody = (extra: Record<string, unknown>) => JSON.stringify({ ...JSON.parse(r.body), ...extra });

  it.each(['/responses', '/v1/responses'])(
    '%s with "background": true is refused, nothing forwarded',
    async (path) => {
      const { mock, ports, base } = await rig(OPENAI, {}, (m) =>
        path === '/responses' ? `${m.url}/v1` : m.url,
      );
      const res = await raw(base, path, 'POST', r.headers, withBody({ background: true }));
      expect(expectRefusal('openai', res)).toBe(
        `[the-loop gateway] POST ${path} is not allowed through the gateway: a background response is run later, and its usage never comes back to be metered`,
      );
      expect(mock.requests).toEqual([]);
      expect(ports.rows).toEqual([]);
      expect(ports.logs.join('\n')).toContain('background response');
    },
  );

  it('a chunked body (no length) asking for background: refused, nothing forwarded', async () => {
    const { mock, base } = await rig(OPENAI);
    const body = new ReadableStream({
      start(controller) {
        const text = withBody({ background: true });
        for (let i = 0; i < text.length; i += 16)
          controller.enqueue(new TextEncoder().encode(text.slice(i, i + 16)));
        controller.close();
      },
    });
    const res = await fetch(`${base}/responses`, {
      method: 'POST',
      headers: r.headers,
      body,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(400);
    expect(mock.requests).toEqual([]);
  });

  it('a compressed body, which cannot be checked, is refused', async () => {
    const { mock, base } = await rig(OPENAI);
    const res = await raw(
      base,
      '/responses',
      'POST',
      { ...r.headers, 'content-encoding': 'gzip' },
      gzipSync(r.body),
    );
    expect(expectRefusal('openai', res)).toMatch(/gzip-encoded body cannot be checked$/);
    expect(mock.requests).toEqual([]);
  });

  it('a chunked body with "background": false is forwarded whole and metered', async () => {
    const { mock, ports, base } = await rig(OPENAI);
    const text = withBody({ background: false });
    const body = new ReadableStream({
      start(controller) {
        for (let i = 0; i < text.length; i += 16)
          controller.enqueue(new TextEncoder().encode(text.slice(i, i + 16)));
        controller.close();
      },
    });
    const res = await fetch(`${base}/responses`, {
      method: 'POST',
      headers: r.headers,
      body,
      duplex: 'half',
    } as RequestInit);
    expect(await res.text()).toContain('Hello through');
    expect(mock.requests.map((q) => q.body)).toEqual([JSON.parse(text)]);
    expect(ports.rows).toHaveLength(1);
    expect(ports.rows[0]?.partial).toBe(false);
  });

  it('a body past the bound, streamed without a length: 413, nothing forwarded', async () => {
    const { mock, ports, base } = await rig(OPENAI, { maxRequestBytes: 1024 });
    const body = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 8; i++) controller.enqueue(new TextEncoder().encode('x'.repeat(512)));
        controller.close();
      },
    });
    const res = await fetch(`${base}/responses`, {
      method: 'POST',
      headers: r.headers,
      body,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(mock.requests).toEqual([]);
    expect(ports.rows).toEqual([]);
  });

  it('over budget: the budget refusal comes first, the body unread', async () => {
    const { mock, ports, base } = await rig(OPENAI);
    ports.over = 'over';
    const res = await raw(base, '/responses', 'POST', r.headers, withBody({ background: true }));
    expect(JSON.parse(res.body)).toMatchObject({ error: { type: 'insufficient_quota' } });
    expect(mock.requests).toEqual([]);
  });
});
