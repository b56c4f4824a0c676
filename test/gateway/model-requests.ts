/**
 * Model requests shaped like each CLI's (path, key header, body), and the mock each one talks to:
 * shared by the wire-meter and model-proxy tests.
 */
import type { Usage } from '../../src/core/events.js';
import type { ModelApi } from '../../src/gateway/types.js';
import { anthropicUsage, geminiUsage, openaiUsage } from '../acceptance/helpers.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import { startGeminiMock } from '../fixtures/mock-apis/gemini.js';
import { startOpenAIMock } from '../fixtures/mock-apis/openai.js';
import type { MockApi, MockOptions, MockUsage } from '../fixtures/mock-apis/types.js';

export interface ModelRequest {
  /** What the engine appends to its base URL (with the query string). */
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

export interface ApiCase {
  api: ModelApi;
  start: (options: MockOptions) => Promise<MockApi>;
  /** The upstream the engine would have used directly (OpenAI-style bases end in /v1). */
  upstream: (mock: MockApi) => string;
  /** A model-turn request carrying `key` where this CLI puts it. */
  request: (key: string, stream: boolean) => ModelRequest;
  /** The key the mock received, from where this CLI puts it. */
  keySeen: (headers: Record<string, string | string[] | undefined>, path: string) => string | undefined;
  /** Our disjoint usage for what the mock reported (the acceptance suite's mapping). */
  expected: (reported: MockUsage[]) => Usage;
}

const json = (v: unknown) => JSON.stringify(v);
const header = (h: Record<string, string | string[] | undefined>, name: string) => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

export const ANTHROPIC: ApiCase = {
  api: 'anthropic',
  start: startAnthropicMock,
  upstream: (m) => m.url,
  request: (key, stream) => ({
    path: '/v1/messages?beta=true',
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': key,
      'anthropic-version': '2023-06-01',
      'accept-encoding': 'gzip, deflate, br',
    },
    // A real turn: Claude Code's tool list and a large max_tokens (the mock tells turns apart so).
    body: json({
      model: 'claude-sonnet-4-5-20250929',
      max_tokens: 32000,
      stream,
      tools: [{ name: 'Bash', description: 'run', input_schema: { type: 'object' } }],
      messages: [{ role: 'user', content: 'hello' }],
    }),
  }),
  keySeen: (h) => header(h, 'x-api-key'),
  expected: anthropicUsage,
};

export const OPENAI: ApiCase = {
  api: 'openai',
  start: startOpenAIMock,
  upstream: (m) => `${m.url}/v1`,
  request: (key, stream) => ({
    path: '/responses',
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${key}`,
      accept: 'text/event-stream',
    },
    body: json({ model: 'gpt-5.5', stream, store: false, input: [{ role: 'user', content: 'hello' }] }),
  }),
  keySeen: (h) => header(h, 'authorization')?.replace(/^Bearer /, ''),
  expected: openaiUsage,
};

export const GEMINI: ApiCase = {
  api: 'gemini',
  start: startGeminiMock,
  upstream: (m) => m.url,
  request: (key) => ({
    path: '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
    body: json({ contents: [{ role: 'user', parts: [{ text: 'hello' }] }] }),
  }),
  keySeen: (h) => header(h, 'x-goog-api-key'),
  expected: geminiUsage,
};

export const CASES: ApiCase[] = [ANTHROPIC, OPENAI, GEMINI];

/** Figures with every kind set, so a mapping that mixes two kinds up shows. */
export const USAGE: MockUsage = { input: 321, output: 12, cacheRead: 40, cacheCreation: 7, reasoning: 3 };

export interface Recorded {
  status: number;
  contentType: string;
  bytes: Buffer;
  reported: MockUsage[];
}

/** One request straight to a fresh mock: the exact bytes it answers, and what it says it reported. */
export async function recordDirect(
  c: ApiCase,
  stream: boolean,
  options: MockOptions = {},
): Promise<Recorded> {
  const mock = await c.start({
    script: [{ kind: 'text', text: 'Hello from the mock, streamed.', usage: USAGE }],
    ...options,
  });
  try {
    const r = c.request('direct-key', stream);
    const res = await fetch(c.upstream(mock) + r.path, {
      method: r.method,
      headers: r.headers,
      body: r.body,
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    return {
      status: res.status,
      contentType: res.headers.get('content-type') ?? '',
      bytes,
      reported: [...mock.reported],
    };
  } finally {
    await mock.close();
  }
}
