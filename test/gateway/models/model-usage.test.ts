import { beforeAll, describe, expect, it } from 'vitest';
import { bodyKind, createUsageMeter } from '../../../src/gateway/models/usage.js';
import type { ModelApi, WireUsage } from '../../../src/gateway/types.js';
import { prng } from '../../helpers/check.js';
import { ANTHROPIC, type ApiCase, CASES, type Recorded, recordDirect } from '../model-requests.js';

const AT = '2026-12-03T10:00:00.000Z';

function meter(api: ModelApi, kind: 'sse' | 'json', chunks: Array<Buffer | string>, maxBytes?: number) {
  const m = createUsageMeter(api, kind, maxBytes === undefined ? {} : { maxBytes });
  for (const c of chunks) m.push(typeof c === 'string' ? Buffer.from(c) : c);
  return { usage: m.finish(AT), note: m.note };
}

const sse = (events: Array<[string, unknown]>, eol = '\n') =>
  events
    .map(([name, data]) => `${name ? `event: ${name}${eol}` : ''}data: ${JSON.stringify(data)}${eol}${eol}`)
    .join('');

describe('wire meter on the mock APIs’ own responses', () => {
  const recorded = new Map<ApiCase, Recorded>();
  beforeAll(async () => {
    for (const c of CASES) recorded.set(c, await recordDirect(c, true));
  });

  it.each(CASES.map((c) => [c.api, c] as const))(
    '%s: reads the usage the mock reported, mapped as the parsers do',
    (_, c) => {
      const r = recorded.get(c) as Recorded;
      expect(bodyKind(r.contentType)).toBe('sse');
      const { usage } = meter(c.api, 'sse', [r.bytes]);
      expect(usage).toMatchObject({ api: c.api, partial: false, at: AT, usage: c.expected(r.reported) });
      expect(usage?.responseId).toMatch(/^\S+$/);
      expect(usage?.model).toMatch(/^(claude|gpt|gemini)-/);
    },
  );

  it.each(CASES.map((c) => [c.api, c] as const))('%s: same result at every byte boundary', (_, c) => {
    const { bytes } = recorded.get(c) as Recorded;
    const whole = meter(c.api, 'sse', [bytes]).usage;
    for (let i = 0; i <= bytes.length; i++) {
      expect(meter(c.api, 'sse', [bytes.subarray(0, i), bytes.subarray(i)]).usage).toEqual(whole);
    }
    const rand = prng(7);
    const chunks: Buffer[] = [];
    for (let i = 0; i < bytes.length; ) {
      const n = 1 + Math.floor(rand() * 5);
      chunks.push(bytes.subarray(i, i + n));
      i += n;
    }
    expect(meter(c.api, 'sse', chunks).usage).toEqual(whole);
  });

  it.each(CASES.map((c) => [c.api, c] as const))(
    '%s: a cut stream gives what it got so far, marked partial',
    (_, c) => {
      const { bytes } = recorded.get(c) as Recorded;
      const whole = meter(c.api, 'sse', [bytes]).usage as WireUsage;
      let sawPartial = false;
      let sawNone = false;
      for (let i = 0; i < bytes.length; i++) {
        const { usage } = meter(c.api, 'sse', [bytes.subarray(0, i)]);
        if (!usage) {
          sawNone = true;
          continue;
        }
        if (usage.partial) {
          sawPartial = true;
          // Never more than the complete figures.
          for (const [k, v] of Object.entries(usage.usage))
            expect(v).toBeLessThanOrEqual(whole.usage[k as keyof typeof whole.usage] ?? 0);
        } else expect(usage).toEqual(whole);
      }
      expect(sawNone).toBe(true);
      // Anthropic's message_start has input figures before the final message_delta; the others report
      // usage only in their final event, so a cut before it has none.
      expect(sawPartial).toBe(c === ANTHROPIC);
    },
  );
});

describe('wire meter, vendor shapes the mocks do not send', () => {
  it('Anthropic: message_delta figures are cumulative and win, input fields included', () => {
    const stream = sse([
      [
        'message_start',
        {
          type: 'message_start',
          message: {
            id: 'msg_1',
            model: 'claude-x',
            usage: {
              input_tokens: 10,
              cache_read_input_tokens: 5,
              cache_creation_input_tokens: 2,
              output_tokens: 1,
            },
          },
        },
      ],
      ['content_block_delta', { type: 'content_block_delta', delta: { text: 'hi' } }],
      ['message_delta', { type: 'message_delta', usage: { output_tokens: 30 } }],
      ['message_delta', { type: 'message_delta', usage: { output_tokens: 42, input_tokens: 11 } }],
      ['message_stop', { type: 'message_stop' }],
    ]);
    expect(meter('anthropic', 'sse', [stream]).usage).toEqual({
      api: 'anthropic',
      responseId: 'msg_1',
      model: 'claude-x',
      usage: {
        inputTokens: 11,
        outputTokens: 42,
        cacheReadTokens: 5,
        cacheCreationTokens: 2,
        reasoningTokens: 0,
      },
      partial: false,
      at: AT,
    });
  });

  it('Anthropic: an error event mid-stream leaves the start figures, partial; a JSON message is whole', () => {
    const stream = sse([
      [
        'message_start',
        {
          type: 'message_start',
          message: { id: 'msg_2', model: 'm', usage: { input_tokens: 9, output_tokens: 1 } },
        },
      ],
      ['error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }],
    ]);
    expect(meter('anthropic', 'sse', [stream]).usage).toMatchObject({
      partial: true,
      usage: { inputTokens: 9, outputTokens: 1 },
    });
    const body = JSON.stringify({
      id: 'msg_3',
      type: 'message',
      model: 'm',
      usage: { input_tokens: 4, output_tokens: 6 },
    });
    expect(meter('anthropic', 'json', [body]).usage).toMatchObject({
      responseId: 'msg_3',
      partial: false,
      usage: { inputTokens: 4, outputTokens: 6 },
    });
  });

  it('OpenAI: cached and written tokens come out of input, reasoning out of output; incomplete is final', () => {
    const usage = {
      input_tokens: 1000,
      input_tokens_details: { cached_tokens: 600, cache_write_tokens: 100 },
      output_tokens: 50,
      output_tokens_details: { reasoning_tokens: 20 },
      total_tokens: 1050,
    };
    const stream = sse([
      [
        'response.created',
        { type: 'response.created', response: { id: 'resp_1', model: 'gpt-5.5', usage: null } },
      ],
      ['response.output_text.delta', { type: 'response.output_text.delta', delta: 'x' }],
      [
        'response.incomplete',
        { type: 'response.incomplete', response: { id: 'resp_1', model: 'gpt-5.5', usage } },
      ],
    ]);
    expect(meter('openai', 'sse', [stream]).usage).toMatchObject({
      responseId: 'resp_1',
      partial: false,
      usage: {
        inputTokens: 300,
        outputTokens: 30,
        cacheReadTokens: 600,
        cacheCreationTokens: 100,
        reasoningTokens: 20,
      },
    });
    // Servers that omit `event:` lines: the type is read from the data.
    const bare = sse([['', { type: 'response.completed', response: { id: 'resp_2', model: 'g', usage } }]]);
    expect(meter('openai', 'sse', [bare]).usage).toMatchObject({ responseId: 'resp_2', partial: false });
    expect(
      meter('openai', 'json', [
        JSON.stringify({ id: 'resp_3', object: 'response', model: 'g', error: null, usage }),
      ]).usage,
    ).toMatchObject({ responseId: 'resp_3', partial: false });
  });

  it('OpenAI: a failed response without usage, or a stream cut after response.created, gives none', () => {
    const created = sse([
      ['response.created', { type: 'response.created', response: { id: 'r', model: 'm', usage: null } }],
    ]);
    const failed = sse([
      ['response.failed', { type: 'response.failed', response: { id: 'r', status: 'failed', usage: null } }],
    ]);
    expect(meter('openai', 'sse', [created]).usage).toBeUndefined();
    expect(meter('openai', 'sse', [created + failed]).usage).toBeUndefined();
  });

  it('Gemini: the last cumulative usageMetadata wins; thoughts apart; final with finishReason', () => {
    const chunk = (extra: Record<string, unknown>) => ({
      responseId: 'gr_1',
      modelVersion: 'gemini-2.5-pro',
      ...extra,
    });
    const stream = sse(
      [
        [
          '',
          chunk({
            candidates: [{ content: { parts: [{ text: 'a' }] } }],
            usageMetadata: { promptTokenCount: 500, cachedContentTokenCount: 200 },
          }),
        ],
        ['', chunk({ candidates: [{ content: { parts: [{ text: 'b' }] } }] })],
        [
          '',
          chunk({
            candidates: [{ finishReason: 'STOP' }],
            usageMetadata: {
              promptTokenCount: 500,
              cachedContentTokenCount: 200,
              candidatesTokenCount: 40,
              thoughtsTokenCount: 15,
              totalTokenCount: 555,
            },
          }),
        ],
      ],
      '\r\n',
    );
    const expected = {
      inputTokens: 300,
      outputTokens: 40,
      cacheReadTokens: 200,
      cacheCreationTokens: 0,
      reasoningTokens: 15,
    };
    expect(meter('gemini', 'sse', [stream]).usage).toEqual({
      api: 'gemini',
      responseId: 'gr_1',
      model: 'gemini-2.5-pro',
      usage: expected,
      partial: false,
      at: AT,
    });
    const firstTwo = stream.slice(0, stream.lastIndexOf('data:'));
    expect(meter('gemini', 'sse', [firstTwo]).usage).toMatchObject({
      partial: true,
      usage: { inputTokens: 300, outputTokens: 0 },
    });
    // The non-sse stream form is a JSON array of the same chunks.
    const array = JSON.stringify([
      chunk({ usageMetadata: { promptTokenCount: 1 } }),
      chunk({
        candidates: [{ finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: 7, candidatesTokenCount: 3 },
      }),
    ]);
    expect(meter('gemini', 'json', [array]).usage).toMatchObject({
      partial: false,
      usage: { inputTokens: 7, outputTokens: 3 },
    });
  });

  it('Gemini: a blocked prompt is a final answer; the model comes from the path when the body has none', () => {
    const m = createUsageMeter('gemini', 'sse', { modelHint: 'gemini-2.5-flash' });
    m.push(
      Buffer.from(
        sse([['', { promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 12 } }]]),
      ),
    );
    expect(m.finish(AT)).toMatchObject({
      model: 'gemini-2.5-flash',
      responseId: null,
      partial: false,
      usage: { inputTokens: 12 },
    });
  });
});

describe('wire meter, responses without usage and garbage', () => {
  it.each([
    ['anthropic', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }],
    [
      'openai',
      { error: { message: 'bad key', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
    ],
    ['gemini', { error: { code: 403, message: 'denied', status: 'PERMISSION_DENIED' } }],
  ] as const)('%s: an error body gives no row', (api, body) => {
    expect(meter(api, 'json', [JSON.stringify(body)]).usage).toBeUndefined();
  });

  it('random bytes, broken JSON and empty bodies give no row and never throw', () => {
    const rand = prng(99);
    const noise = Buffer.from(Array.from({ length: 4096 }, () => Math.floor(rand() * 256)));
    for (const api of ['anthropic', 'openai', 'gemini'] as const) {
      expect(meter(api, 'sse', [noise]).usage).toBeUndefined();
      expect(meter(api, 'json', [noise]).usage).toBeUndefined();
      expect(
        meter(api, 'sse', ['event: message_start\ndata: {"type":"message_start","message":\n\n']).usage,
      ).toBeUndefined();
      expect(meter(api, 'json', []).usage).toBeUndefined();
      expect(meter(api, 'sse', ['data: [1,2,3]\n\ndata: null\n\ndata: "x"\n\n']).usage).toBeUndefined();
    }
    expect(meter('anthropic', 'json', ['{"id":"msg","usage":{"input_tokens":3']).note).toBe(
      'the body is not complete JSON',
    );
  });

  it('a body over the bound is not buffered, and says why', () => {
    const body = JSON.stringify({ id: 'msg', model: 'm', usage: { input_tokens: 1 }, pad: 'x'.repeat(200) });
    const r = meter('anthropic', 'json', [body.slice(0, 100), body.slice(100)], 128);
    expect(r.usage).toBeUndefined();
    expect(r.note).toMatch(/over 128 bytes/);
  });

  it('knows its content types', () => {
    expect(bodyKind('text/event-stream; charset=utf-8')).toBe('sse');
    expect(bodyKind('application/json; charset=UTF-8')).toBe('json');
    expect(bodyKind('application/problem+json')).toBe('json');
    expect(bodyKind('text/html')).toBeUndefined();
    expect(bodyKind(undefined)).toBeUndefined();
  });

  it('reads the non-stream Anthropic answer of the mock', async () => {
    const r = await recordDirect(ANTHROPIC, false);
    expect(bodyKind(r.contentType)).toBe('json');
    expect(meter('anthropic', 'json', [r.bytes]).usage).toMatchObject({
      partial: false,
      usage: ANTHROPIC.expected(r.reported),
    });
  });
});
