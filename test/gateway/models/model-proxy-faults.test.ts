import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createModelHandler } from '../../../src/gateway/models/model-proxy.js';
import { ANTHROPIC, type ApiCase, GEMINI, OPENAI, recordDirect, USAGE } from '../model-requests.js';
import { fakePorts, type Listening, listen, REAL_KEY, startStub, TOKEN, waitFor } from '../model-stub.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function upstreamServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<Listening> {
  const server = await listen(createServer(handler));
  cleanups.push(() => server.close());
  return server;
}

async function rig(c: ApiCase, upstream: string, idleTimeoutMs = 60_000) {
  const ports = fakePorts({ api: c.api, upstream, credential: { value: REAL_KEY, kind: 'api-key' } });
  const handler = createModelHandler({ idleTimeoutMs });
  cleanups.push(async () => handler.close());
  const gw = await startStub(handler, ports);
  cleanups.push(() => gw.close());
  const r = c.request(TOKEN, true);
  const call = (init: RequestInit = {}) =>
    fetch(`${gw.url}/m/${TOKEN}${r.path}`, { method: r.method, headers: r.headers, body: r.body, ...init });
  return { ports, call };
}

/** Read a streamed body until `done(text)` holds; the reader stays open. */
async function readUntil(body: ReadableStream<Uint8Array>, done: (text: string) => boolean) {
  const reader = body.getReader();
  let text = '';
  while (!done(text)) {
    const { value, done: end } = await reader.read();
    if (end) throw new Error(`stream ended before the expected bytes: ${text}`);
    text += Buffer.from(value).toString('utf8');
  }
  return { reader, text };
}

describe('model proxy streaming and failures', () => {
  it('relays SSE as it comes: the first events arrive while the mock still holds the rest', async () => {
    // The mock sends the first half of the answer, then stalls for a minute before the rest.
    const mock = await ANTHROPIC.start({
      script: [{ kind: 'text', text: 'First half. Second half.', usage: USAGE, stallMs: 60_000 }],
    });
    cleanups.push(() => mock.close());
    const { ports, call } = await rig(ANTHROPIC, mock.url);
    const res = await call();
    const { reader, text } = await readUntil(res.body as ReadableStream<Uint8Array>, (t) =>
      t.includes('First half'),
    );
    expect(text).toContain('event: message_start');
    expect(text).not.toContain('message_stop');
    expect(ports.rows).toEqual([]);
    // The engine gives up mid-stream: the upstream exchange ends, usage is recorded as far as it got.
    await reader.cancel();
    await waitFor(() => ports.rows.length === 1, 'the partial row');
    expect(ports.rows[0]).toMatchObject({
      api: 'anthropic',
      partial: true,
      usage: { inputTokens: 321, cacheReadTokens: 40, cacheCreationTokens: 7, outputTokens: 1 },
    });
  });

  it('a client that disconnects aborts the upstream request', async () => {
    let upstreamClosed = false;
    const upstream = await upstreamServer((req, res) => {
      req.resume();
      res.on('close', () => {
        upstreamClosed = true;
      });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const start = {
        type: 'message_start',
        message: { id: 'msg_x', model: 'm', usage: { input_tokens: 5, output_tokens: 1 } },
      };
      res.write(`event: message_start\ndata: ${JSON.stringify(start)}\n\n`);
    });
    const { ports, call } = await rig(ANTHROPIC, upstream.url);
    const abort = new AbortController();
    const res = await call({ signal: abort.signal });
    await readUntil(res.body as ReadableStream<Uint8Array>, (t) => t.includes('message_start'));
    abort.abort();
    await waitFor(() => upstreamClosed, 'the upstream connection to close');
    await waitFor(() => ports.rows.length === 1, 'the partial row');
    expect(ports.rows[0]).toMatchObject({ responseId: 'msg_x', partial: true, usage: { inputTokens: 5 } });
    expect(ports.logs.join('\n')).toMatch(/"outcome":"client-gone"/);
  });

  // Anthropic reports input figures at the start; the others only in their final event.
  it.each([
    ['anthropic', ANTHROPIC, true],
    ['openai', OPENAI, false],
    ['gemini', GEMINI, false],
  ] as const)(
    '%s: an upstream that dies mid-stream cuts the response; usage as far as it got',
    async (_, c, hasUsage) => {
      const recorded = await recordDirect(c, true);
      const half = recorded.bytes.subarray(0, Math.floor(recorded.bytes.length / 2));
      const upstream = await upstreamServer((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': recorded.contentType });
        res.write(half, () => setImmediate(() => res.socket?.destroy()));
      });
      const { ports, call } = await rig(c, c === OPENAI ? `${upstream.url}/v1` : upstream.url);
      const res = await call();
      expect(res.status).toBe(200);
      await expect(res.arrayBuffer()).rejects.toThrow();
      await waitFor(() => ports.logs.some((l) => l.includes('"outcome":"cut"')), 'the cut to be seen');
      if (hasUsage) {
        expect(ports.rows).toEqual([expect.objectContaining({ api: c.api, partial: true })]);
        expect(ports.rows[0]?.usage.inputTokens).toBe(USAGE.input);
      } else expect(ports.rows).toEqual([]);
    },
  );

  it('an upstream that never answers: 504 in the vendor shape after the idle timeout', async () => {
    const upstream = await upstreamServer((req) => {
      req.resume();
    });
    const { ports, call } = await rig(GEMINI, upstream.url, 200);
    const res = await call();
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ error: { code: 504, status: 'DEADLINE_EXCEEDED' } });
    expect(ports.rows).toEqual([]);
  });

  it('an upstream that goes silent mid-stream: the response is cut at the idle timeout, partial row', async () => {
    const upstream = await upstreamServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const start = {
        type: 'message_start',
        message: { id: 'msg_s', model: 'm', usage: { input_tokens: 8, output_tokens: 1 } },
      };
      res.write(`event: message_start\ndata: ${JSON.stringify(start)}\n\n`);
    });
    const { ports, call } = await rig(ANTHROPIC, upstream.url, 200);
    const res = await call();
    await expect(res.text()).rejects.toThrow();
    await waitFor(() => ports.rows.length === 1, 'the partial row');
    expect(ports.rows[0]).toMatchObject({ responseId: 'msg_s', partial: true });
  });

  it('an upstream that refuses connections: 502 in the vendor shape', async () => {
    const gone = await listen(createServer());
    await gone.close();
    const { ports, call } = await rig(OPENAI, `${gone.url}/v1`);
    const res = await call();
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: { type: 'server_error' } });
    expect(ports.rows).toEqual([]);
    expect(ports.logs.join('\n')).toMatch(/"outcome":"upstream-error".*ECONNREFUSED/);
  });
});
