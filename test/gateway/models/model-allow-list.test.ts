import { describe, expect, it } from 'vitest';
import {
  allowedRequest,
  isReachabilityCheck,
  notAllowedMessage,
  refusedBody,
  shownPath,
} from '../../../src/gateway/models/allow-list.js';
import { pathUnderBase, upstreamUrl } from '../../../src/gateway/models/rewrite.js';
import { vendorError } from '../../../src/gateway/models/vendor-errors.js';
import type { ModelApi } from '../../../src/gateway/types.js';

type Row = [ModelApi, string, string];

/** What the CLIs send (model-proxy-cli.test.ts, and their bundles), and the reads beside it. */
const ALLOWED: Array<[...Row, 'responses' | undefined]> = [
  ['anthropic', 'POST', '/v1/messages', undefined],
  ['anthropic', 'POST', '/v1/messages/count_tokens', undefined],
  ['anthropic', 'GET', '/v1/models', undefined],
  ['anthropic', 'GET', '/v1/models/claude-sonnet-4-5-20250929', undefined],
  ['anthropic', 'GET', '', undefined],
  ['anthropic', 'GET', '/', undefined],
  ['openai', 'POST', '/responses', 'responses'],
  ['openai', 'POST', '/v1/responses', 'responses'],
  ['openai', 'GET', '/models', undefined],
  ['openai', 'GET', '/v1/models', undefined],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-pro:generateContent', undefined],
  ['gemini', 'POST', '/v1beta/models/gemini-3.8-flash:streamGenerateContent', undefined],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-pro:countTokens', undefined],
  ['gemini', 'POST', '/v1/models/gemini-2.5-pro:generateContent', undefined],
  ['gemini', 'POST', '/v1alpha/models/gemini-2.5-pro:streamGenerateContent', undefined],
  ['gemini', 'GET', '/v1beta/models', undefined],
  ['gemini', 'GET', '/v1beta/models/gemini-2.5-pro', undefined],
];

/** Work whose bill never comes back on the connection, other vendors' paths, tricks and odd methods. */
const REFUSED: Row[] = [
  ['anthropic', 'POST', '/v1/messages/batches'],
  ['anthropic', 'GET', '/v1/messages/batches/msgbatch_1'],
  ['anthropic', 'POST', '/v1/messages/batches/msgbatch_1/cancel'],
  ['anthropic', 'POST', '/v1/files'],
  ['anthropic', 'GET', '/v1/files/file_1/content'],
  ['anthropic', 'POST', '/v1/complete'],
  ['anthropic', 'POST', '/v1/skills'],
  ['anthropic', 'POST', '/v1/sessions'],
  ['anthropic', 'POST', '/v1/agents'],
  ['anthropic', 'GET', '/v1/messages'],
  ['anthropic', 'DELETE', '/v1/models/claude-x'],
  ['anthropic', 'POST', '/v1/models'],
  ['anthropic', 'POST', '/v1/messages/'],
  ['anthropic', 'POST', '/v1/messages%2Fbatches'],
  ['anthropic', 'POST', '/v1/responses'],
  ['anthropic', 'POST', ''],
  ['anthropic', 'HEAD', '/v1/messages'],
  ['anthropic', 'OPTIONS', '/v1/messages'],
  ['anthropic', 'GET', '/v1/models/../files'],
  ['openai', 'POST', '/batches'],
  ['openai', 'POST', '/v1/batches'],
  ['openai', 'POST', '/fine_tuning/jobs'],
  ['openai', 'POST', '/v1/fine_tuning/jobs'],
  ['openai', 'POST', '/images/generations'],
  ['openai', 'POST', '/files'],
  ['openai', 'POST', '/uploads'],
  ['openai', 'POST', '/chat/completions'],
  ['openai', 'POST', '/completions'],
  ['openai', 'POST', '/embeddings'],
  ['openai', 'POST', '/audio/speech'],
  ['openai', 'POST', '/vector_stores'],
  ['openai', 'POST', '/realtime/sessions'],
  ['openai', 'GET', '/responses/resp_1'],
  ['openai', 'POST', '/responses/resp_1/cancel'],
  ['openai', 'POST', '/responses/compact'],
  ['openai', 'POST', '/responses/input_tokens'],
  ['openai', 'GET', '/responses'],
  ['openai', 'GET', '/models/gpt-5'],
  ['openai', 'POST', '/v1/v1/responses'],
  ['openai', 'POST', '/v1/messages'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-pro:batchGenerateContent'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-pro:embedContent'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-pro:batchEmbedContents'],
  ['gemini', 'POST', '/v1beta/models/imagen-4:predict'],
  ['gemini', 'POST', '/v1beta/models/veo-3:predictLongRunning'],
  ['gemini', 'POST', '/v1beta/tunedModels'],
  ['gemini', 'POST', '/v1beta/tunedModels/t1:generateContent'],
  ['gemini', 'POST', '/v1beta/cachedContents'],
  ['gemini', 'POST', '/upload/v1beta/files'],
  ['gemini', 'GET', '/v1beta/files'],
  ['gemini', 'POST', '/v1beta/batches/b1:cancel'],
  ['gemini', 'POST', '/v1internal:generateContent'],
  ['gemini', 'POST', '/v1internal:streamGenerateContent'],
  ['gemini', 'POST', '/v1beta/models/..:generateContent'],
  ['gemini', 'POST', '/v1beta/models/a%2F..%2Ffiles:generateContent'],
  ['gemini', 'POST', '/v2/models/gemini-2.5-pro:generateContent'],
  ['gemini', 'GET', '/v1beta/models/gemini-2.5-pro:generateContent'],
  ['gemini', 'GET', '/v1beta/models/a/b'],
  ['gemini', 'GET', ''],
];

describe('the allow-list', () => {
  it.each(ALLOWED)('%s %s %s passes', (api, method, path, check) => {
    expect(allowedRequest(api, method, path)).toEqual(check ? { allowed: true, check } : { allowed: true });
  });

  it.each(REFUSED)('%s %s %s is refused', (api, method, path) => {
    expect(allowedRequest(api, method, path)).toEqual({ allowed: false });
  });

  it('is per API: one vendor’s model request is not another’s', () => {
    expect(allowedRequest('openai', 'POST', '/v1/messages').allowed).toBe(false);
    expect(allowedRequest('anthropic', 'POST', '/v1beta/models/g:generateContent').allowed).toBe(false);
    expect(allowedRequest('gemini', 'POST', '/responses').allowed).toBe(false);
  });

  it('is matched on the path as it goes upstream: dot segments resolved, under the base’s prefix', () => {
    const under = (base: string, path: string) => {
      const url = upstreamUrl(base, path, 'tok', 'key');
      return url && pathUnderBase(base, url);
    };
    expect(under('https://api.openai.com/v1', '/responses?x=1')).toBe('/responses');
    expect(under('https://api.openai.com/v1/', '/models')).toBe('/models');
    expect(under('https://api.anthropic.com', '/v1/messages/../messages/batches')).toBe(
      '/v1/messages/batches',
    );
    expect(under('https://api.anthropic.com', '/v1/messages/./count_tokens')).toBe(
      '/v1/messages/count_tokens',
    );
    expect(under('https://api.anthropic.com', '')).toBe('/');
    expect(under('https://proxy.example/openai/v1', '/responses')).toBe('/responses');
  });

  it('answers the reachability HEAD on the bare base only', () => {
    expect(isReachabilityCheck('HEAD', '')).toBe(true);
    expect(isReachabilityCheck('HEAD', '/')).toBe(true);
    expect(isReachabilityCheck('HEAD', '?beta=true')).toBe(true);
    expect(isReachabilityCheck('GET', '')).toBe(false);
    expect(isReachabilityCheck('HEAD', '/v1/messages/batches')).toBe(false);
  });
});

describe('the Responses body check', () => {
  const body = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));
  const turn = { model: 'gpt-5.5', stream: true, input: [{ role: 'user', content: 'hi' }] };

  it.each([
    ['no background', turn],
    ['background: false', { ...turn, background: false }],
    ['background: null', { ...turn, background: null }],
    ['a nested "background": true', { ...turn, metadata: { background: true } }],
  ])('passes %s', (_, v) => {
    expect(refusedBody('responses', body(v), undefined)).toBeUndefined();
    expect(refusedBody('responses', body(v), 'identity')).toBeUndefined();
  });

  it.each([
    ['background: true', body({ ...turn, background: true }), undefined, /background response/],
    ['background: "true"', body({ ...turn, background: 'true' }), undefined, /background response/],
    ['background: 1', body({ ...turn, background: 1 }), undefined, /background response/],
    [
      'a duplicate key, last one true',
      body('{"background":false,"background":true}'),
      undefined,
      /background/,
    ],
    ['not JSON', body('{"model":'), undefined, /not JSON/],
    ['an array', body([turn]), undefined, /not a JSON object/],
    ['an empty body', body(''), undefined, /not JSON/],
    ['a gzip body', body(turn), 'gzip', /gzip-encoded body cannot be checked/],
    ['a zstd body', body(turn), 'zstd', /zstd-encoded/],
  ])('refuses %s', (_, b, encoding, why) => {
    expect(refusedBody('responses', b, encoding)).toMatch(why);
  });
});

describe('the refusal', () => {
  it('says what was refused, with the token redacted and a long path bounded', () => {
    expect(notAllowedMessage('POST', '/v1/messages/batches')).toBe(
      '[the-loop gateway] POST /v1/messages/batches is not allowed through the gateway: only model requests, token counts and model lists pass',
    );
    expect(notAllowedMessage('POST', '/responses', 'why')).toBe(
      '[the-loop gateway] POST /responses is not allowed through the gateway: why',
    );
    expect(shownPath('/v1/files/tlg1_x/y', 'tlg1_x')).toBe('/v1/files/<token>/y');
    expect(shownPath(`/${'a'.repeat(500)}`, 't')).toHaveLength(201);
  });

  it.each([
    ['anthropic', 403, { type: 'error', error: { type: 'permission_error', message: 'm' } }],
    [
      'openai',
      400,
      { error: { message: 'm', type: 'invalid_request_error', param: null, code: 'not_allowed' } },
    ],
    ['gemini', 403, { error: { code: 403, message: 'm', status: 'PERMISSION_DENIED' } }],
  ] as const)('%s: %i in the vendor’s shape, a status its CLI does not retry', (api, status, shape) => {
    const e = vendorError(api, 'not-allowed', 'm');
    expect([e.status, JSON.parse(e.body)]).toEqual([status, shape]);
    if (api === 'anthropic') expect(e.headers['x-should-retry']).toBe('false');
  });
});
