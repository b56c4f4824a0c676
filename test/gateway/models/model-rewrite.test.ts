import { describe, expect, it } from 'vitest';
import {
  clientResponseHeaders,
  upstreamRequestHeaders,
  upstreamUrl,
} from '../../../src/gateway/models/rewrite.js';
import { guessApi, vendorError } from '../../../src/gateway/models/vendor-errors.js';

const TOKEN = `tlg1_${'a'.repeat(43)}`;
const REAL = 'sk-real-0123456789';

describe('upstreamRequestHeaders', () => {
  it('puts the real credential where the token was, in the same place', () => {
    expect(upstreamRequestHeaders({ 'x-api-key': TOKEN }, TOKEN, REAL)['x-api-key']).toBe(REAL);
    expect(upstreamRequestHeaders({ 'x-goog-api-key': TOKEN }, TOKEN, REAL)['x-goog-api-key']).toBe(REAL);
    expect(upstreamRequestHeaders({ authorization: `Bearer ${TOKEN}` }, TOKEN, REAL).authorization).toBe(
      `Bearer ${REAL}`,
    );
    expect(upstreamRequestHeaders({ authorization: `bearer  ${TOKEN} ` }, TOKEN, REAL).authorization).toBe(
      `Bearer ${REAL}`,
    );
  });

  it('without a real credential removes the token; another credential passes unchanged', () => {
    const out = upstreamRequestHeaders(
      { 'x-api-key': TOKEN, authorization: `Bearer ${TOKEN}` },
      TOKEN,
      undefined,
    );
    expect(out).not.toHaveProperty('x-api-key');
    expect(out).not.toHaveProperty('authorization');
    const oauth = 'Bearer sk-ant-oat01-abc';
    expect(upstreamRequestHeaders({ authorization: oauth }, TOKEN, REAL).authorization).toBe(oauth);
    expect(upstreamRequestHeaders({ 'x-api-key': 'sk-other' }, TOKEN, REAL)['x-api-key']).toBe('sk-other');
  });

  it('never relays the token from anywhere else, nor hop-by-hop fields; asks for an identity body', () => {
    const out = upstreamRequestHeaders(
      {
        host: 'gateway',
        connection: 'keep-alive, x-private',
        'x-private': 'hop',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        'proxy-authorization': 'Basic xyz',
        te: 'trailers',
        upgrade: 'websocket',
        expect: '100-continue',
        'accept-encoding': 'gzip, br',
        'x-custom-token': `prefix ${TOKEN}`,
        'x-api-key': TOKEN,
        'content-type': 'application/json',
        'content-length': '12',
        'anthropic-beta': 'a,b',
      },
      TOKEN,
      REAL,
    );
    expect(out).toEqual({
      'accept-encoding': 'identity',
      'x-api-key': REAL,
      'content-type': 'application/json',
      'content-length': '12',
      'anthropic-beta': 'a,b',
    });
  });

  it('relays end-to-end response headers only', () => {
    expect(
      clientResponseHeaders({
        'content-type': 'text/event-stream',
        'transfer-encoding': 'chunked',
        connection: 'keep-alive',
        'keep-alive': 'timeout=5',
        'request-id': 'req_1',
        'set-cookie': ['a=1', 'b=2'],
      }),
    ).toEqual({ 'content-type': 'text/event-stream', 'request-id': 'req_1', 'set-cookie': ['a=1', 'b=2'] });
  });
});

describe('upstreamUrl', () => {
  it('concatenates the base (with its prefix) and the path the engine appended', () => {
    expect(upstreamUrl('https://api.openai.com/v1', '/responses', TOKEN, REAL)?.href).toBe(
      'https://api.openai.com/v1/responses',
    );
    expect(upstreamUrl('https://api.anthropic.com', '/v1/messages?beta=true', TOKEN, REAL)?.href).toBe(
      'https://api.anthropic.com/v1/messages?beta=true',
    );
    expect(upstreamUrl('http://127.0.0.1:9/', '/v1/x', TOKEN, REAL)?.href).toBe('http://127.0.0.1:9/v1/x');
  });

  it('refuses anything that leaves the base: other origins, credentials, dot segments above the prefix', () => {
    for (const path of [
      '@evil.example/v1/x',
      'evil',
      '.evil.example/v1',
      '/../admin',
      '/%2e%2e/admin',
      '/x/../../y',
    ]) {
      expect(upstreamUrl('https://api.openai.com/v1', path, TOKEN, REAL), path).toBeUndefined();
    }
    expect(upstreamUrl('not a url', '/x', TOKEN, REAL)).toBeUndefined();
    // Dot segments that stay under the prefix are only normalised.
    expect(upstreamUrl('https://api.openai.com/v1', '/a/../responses', TOKEN, REAL)?.pathname).toBe(
      '/v1/responses',
    );
  });

  it('swaps `key=<token>` for the real key, and drops any other parameter holding the token', () => {
    const url = upstreamUrl(
      'https://g.example',
      `/v1beta/models/m:generateContent?alt=sse&key=${TOKEN}&x=${TOKEN}`,
      TOKEN,
      REAL,
    );
    expect(url?.search).toBe(`?alt=sse&key=${REAL}`);
    expect(upstreamUrl('https://g.example', `/v1beta/x?key=${TOKEN}`, TOKEN, undefined)?.search).toBe('');
    expect(upstreamUrl('https://g.example', '/v1beta/x?key=own-key', TOKEN, REAL)?.search).toBe(
      '?key=own-key',
    );
  });
});

describe('vendor errors', () => {
  it('tells the vendor from the request when no route says it', () => {
    expect(guessApi('/v1beta/models/gemini-2.5-pro:generateContent', {})).toBe('gemini');
    expect(guessApi('/x', { 'x-goog-api-key': 'k' })).toBe('gemini');
    expect(guessApi('/v1/messages', { 'x-api-key': 'k' })).toBe('anthropic');
    expect(guessApi('/v1/messages', { 'anthropic-version': '2023-06-01' })).toBe('anthropic');
    expect(guessApi('/responses', { authorization: 'Bearer k' })).toBe('openai');
  });

  it('answers in each vendor’s JSON error shape, with a length', () => {
    const a = vendorError('anthropic', 'timeout', 'late');
    expect([a.status, a.headers['x-should-retry'], JSON.parse(a.body)]).toEqual([
      504,
      'true',
      { type: 'error', error: { type: 'api_error', message: 'late' } },
    ]);
    expect(Number(a.headers['content-length'])).toBe(Buffer.byteLength(a.body));
    const o = vendorError('openai', 'bad-gateway', 'down');
    expect([o.status, JSON.parse(o.body)]).toEqual([
      502,
      { error: { message: 'down', type: 'server_error', param: null, code: null } },
    ]);
    const g = vendorError('gemini', 'too-large', 'big');
    expect([g.status, JSON.parse(g.body)]).toEqual([
      413,
      { error: { code: 413, message: 'big', status: 'INVALID_ARGUMENT' } },
    ]);
  });
});
