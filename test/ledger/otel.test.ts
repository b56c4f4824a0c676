import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type OtelUsageRecord, parseOtlpLogs, parseOtlpMetrics } from '../../src/ledger/otel.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'otlp');
const fixture = (name: string): unknown => JSON.parse(readFileSync(join(FIXTURES, name), 'utf8'));
const LOGS = 'claude-2.1.197.logs.json';
const METRICS = 'claude-2.1.197.metrics.json';

const SESSION = '11111111-2222-3333-4444-555555555555';
/** A fixed receive time, a few minutes after the fixtures were captured. */
const NOW = Date.parse('2026-12-02T23:45:00.000Z');
const NOW_ISO = new Date(NOW).toISOString();
/** 2026-12-02T23:40:00.000Z in OTLP nanoseconds. */
const T0 = 1_796_254_800_000;
const nanos = (ms: number) => `${ms}000000`;

// ---- OTLP/JSON builders -------------------------------------------------------------------------

type Value = Record<string, unknown>;
const s = (v: string): Value => ({ stringValue: v });
const i = (v: number | string): Value => ({ intValue: v });
const dbl = (v: number | string): Value => ({ doubleValue: v });
const kv = (key: string, value: unknown) => ({ key, value });

interface ApiRequest {
  input?: Value | null;
  output?: Value | null;
  cacheRead?: Value | null;
  cacheCreation?: Value | null;
  requestId?: string | null;
  sessionId?: string | null;
  sequence?: number | null;
  promptId?: string | null;
  model?: string | null;
  cost?: Value | null;
  name?: string | null;
  timestamp?: string | null;
  /** null: no timeUnixNano field at all. */
  timeUnixNano?: unknown;
  body?: string;
}

/** One `*.api_request` log record as Claude Code 2.1.197 writes it (fields overridable, null drops). */
function apiRequest(o: ApiRequest = {}): Record<string, unknown> {
  const attrs: Array<[string, Value | null | undefined]> = [
    ['session.id', o.sessionId === null ? null : s(o.sessionId ?? SESSION)],
    ['event.name', o.name === null ? null : s(o.name ?? 'api_request')],
    ['event.timestamp', o.timestamp === null ? null : s(o.timestamp ?? new Date(T0 + 1000).toISOString())],
    ['event.sequence', o.sequence === null ? null : i(o.sequence ?? 1)],
    ['prompt.id', o.promptId === null ? null : s(o.promptId ?? 'prompt-1')],
    ['model', o.model === null ? null : s(o.model ?? 'claude-sonnet-4-5')],
    ['input_tokens', o.input === undefined ? i(100) : o.input],
    ['output_tokens', o.output === undefined ? i(10) : o.output],
    ['cache_read_tokens', o.cacheRead === undefined ? i(5) : o.cacheRead],
    ['cache_creation_tokens', o.cacheCreation === undefined ? i(1) : o.cacheCreation],
    ['cost_usd', o.cost === undefined ? dbl(0.01) : o.cost],
    ['request_id', o.requestId === null ? null : s(o.requestId ?? 'req_A')],
  ];
  return {
    ...(o.timeUnixNano === null ? {} : { timeUnixNano: o.timeUnixNano ?? nanos(T0 + 1000) }),
    body: s(o.body ?? 'claude_code.api_request'),
    attributes: attrs.filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => kv(k, v)),
  };
}

const logs = (records: unknown[], resource: unknown[] = []) => ({
  resourceLogs: [{ resource: { attributes: resource }, scopeLogs: [{ scope: {}, logRecords: records }] }],
});

interface Point {
  type?: string | null;
  value?: number | string;
  asInt?: boolean;
  sessionId?: string | null;
  model?: string | null;
  start?: number;
  end?: number;
}

function point(o: Point = {}): Record<string, unknown> {
  const attrs = [
    ...(o.sessionId === null ? [] : [kv('session.id', s(o.sessionId ?? SESSION))]),
    ...(o.model === null ? [] : [kv('model', s(o.model ?? 'claude-sonnet-4-5'))]),
    ...(o.type === null || o.type === undefined ? [] : [kv('type', s(o.type))]),
  ];
  const value = o.value ?? 1;
  return {
    attributes: attrs,
    startTimeUnixNano: nanos(o.start ?? T0),
    timeUnixNano: nanos(o.end ?? T0 + 5000),
    ...(o.asInt ? { asInt: value } : { asDouble: value }),
  };
}

/** A sum metric; temporality 1 is delta, 2 cumulative ('omit' leaves the field out). */
const metric = (name: string, points: unknown[], temporality: unknown = 1) => ({
  name,
  unit: '',
  sum: {
    ...(temporality === 'omit' ? {} : { aggregationTemporality: temporality }),
    isMonotonic: true,
    dataPoints: points,
  },
});

const metrics = (list: unknown[], resource: unknown[] = []) => ({
  resourceMetrics: [{ resource: { attributes: resource }, scopeMetrics: [{ scope: {}, metrics: list }] }],
});

/** The four token points and the cost point of one request, in one export window. */
const window = (
  o: Point & {
    input?: number;
    output?: number;
    cacheRead?: number;
    cacheCreation?: number;
    cost?: number;
  } = {},
) => [
  metric('claude_code.token.usage', [
    point({ ...o, type: 'input', value: o.input ?? 100 }),
    point({ ...o, type: 'output', value: o.output ?? 10 }),
    point({ ...o, type: 'cacheRead', value: o.cacheRead ?? 5 }),
    point({ ...o, type: 'cacheCreation', value: o.cacheCreation ?? 1 }),
  ]),
  metric('claude_code.cost.usage', [point({ ...o, value: o.cost ?? 0.01 })]),
];

const usage = (input: number, output: number, cacheRead: number, cacheCreation: number, reasoning = 0) => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: cacheRead,
  cacheCreationTokens: cacheCreation,
  reasoningTokens: reasoning,
});

const total = (records: OtelUsageRecord[]) =>
  records.reduce(
    (t, r) => ({
      inputTokens: t.inputTokens + r.usage.inputTokens,
      outputTokens: t.outputTokens + r.usage.outputTokens,
      cacheReadTokens: t.cacheReadTokens + r.usage.cacheReadTokens,
      cacheCreationTokens: t.cacheCreationTokens + r.usage.cacheCreationTokens,
      reasoningTokens: t.reasoningTokens + r.usage.reasoningTokens,
    }),
    usage(0, 0, 0, 0),
  );

// ---- logs ---------------------------------------------------------------------------------------

describe('parseOtlpLogs', () => {
  it('reads the one api_request of the real Claude Code 2.1.197 export, and nothing else', () => {
    const parsed = parseOtlpLogs(fixture(LOGS), NOW);
    expect(parsed).toEqual({
      records: [
        {
          sourceId: 'log:req_4SqDJ_4AilbEgiXC',
          at: '2026-12-02T23:40:20.980Z',
          engineSessionId: SESSION,
          model: 'claude-opus-4-8',
          usage: usage(321, 12, 40, 7),
          costUsd: 0.00196875,
        },
      ],
      rejected: 0,
      warnings: [],
    });
  });

  it('gives the same record for the same payload (re-posting adds nothing)', () => {
    expect(parseOtlpLogs(fixture(LOGS), NOW)).toEqual(parseOtlpLogs(fixture(LOGS), NOW + 60_000));
  });

  it('reads intValue as an int64 JSON string and as a JSON number', () => {
    const parsed = parseOtlpLogs(
      logs([
        apiRequest({
          requestId: 'req_str',
          input: i('321'),
          output: i('12'),
          cacheRead: i('40'),
          cacheCreation: i('7'),
        }),
        apiRequest({
          requestId: 'req_num',
          input: i(321),
          output: i(12),
          cacheRead: i(40),
          cacheCreation: i(7),
        }),
      ]),
      NOW,
    );
    expect(parsed.rejected).toBe(0);
    expect(parsed.records.map((r) => [r.sourceId, r.usage])).toEqual([
      ['log:req_str', usage(321, 12, 40, 7)],
      ['log:req_num', usage(321, 12, 40, 7)],
    ]);
  });

  it('reads an integral doubleValue count, a string cost, and treats missing counts as 0', () => {
    const parsed = parseOtlpLogs(
      logs([
        apiRequest({ input: dbl(50), output: null, cacheRead: null, cacheCreation: null, cost: dbl('0.25') }),
      ]),
      NOW,
    );
    expect(parsed.rejected).toBe(0);
    expect(parsed.records[0]?.usage).toEqual(usage(50, 0, 0, 0));
    expect(parsed.records[0]?.costUsd).toBe(0.25);
  });

  it('keeps no cost when the engine gave none or an impossible one', () => {
    const parsed = parseOtlpLogs(
      logs([
        apiRequest({ requestId: 'a', cost: null }),
        apiRequest({ requestId: 'b', cost: dbl(-1) }),
        apiRequest({ requestId: 'c', cost: s('lots') }),
        apiRequest({ requestId: 'd', cost: dbl('NaN') }),
      ]),
      NOW,
    );
    expect(parsed.records.map((r) => r.costUsd)).toEqual([null, null, null, null]);
    expect(parsed.rejected).toBe(0);
  });

  it.each([
    ['null', null],
    ['an array', []],
    ['a string', 'resourceLogs'],
    ['a number', 42],
    ['an empty object', {}],
    ['resourceLogs that is not an array', { resourceLogs: { 0: {} } }],
    ['a metrics payload', { resourceMetrics: [] }],
  ])('answers %s with a warning, not a crash', (_, body) => {
    const parsed = parseOtlpLogs(body, NOW);
    expect(parsed.records).toEqual([]);
    expect(parsed.rejected).toBe(0);
    expect(parsed.warnings).toEqual(['not an OTLP logs payload (no resourceLogs array)']);
  });

  it('accepts an empty export', () => {
    expect(parseOtlpLogs({ resourceLogs: [] }, NOW)).toEqual({ records: [], rejected: 0, warnings: [] });
  });

  it('ignores events that are not about usage, without counting them as rejected', () => {
    const parsed = parseOtlpLogs(
      logs([
        apiRequest({ name: 'user_prompt', body: 'claude_code.user_prompt' }),
        apiRequest({ name: 'tool_result', body: 'claude_code.tool_result' }),
        apiRequest({ name: 'api_error', body: 'claude_code.api_error' }),
        apiRequest({ name: 'api_request_extra', body: 'x' }),
        apiRequest({ name: 'my_api_request', body: 'x' }),
        { body: s('plain log line'), attributes: [] },
      ]),
      NOW,
    );
    expect(parsed).toEqual({ records: [], rejected: 0, warnings: [] });
  });

  it('recognises api_request under another prefix, and by the body when there is no event.name', () => {
    const parsed = parseOtlpLogs(
      logs([
        apiRequest({ requestId: 'prefixed', name: 'other_cli.api_request' }),
        apiRequest({ requestId: 'from-body', name: null, body: 'claude_code.api_request' }),
        apiRequest({ requestId: 'bare', name: 'api_request' }),
      ]),
      NOW,
    );
    expect(parsed.records.map((r) => r.sourceId)).toEqual(['log:prefixed', 'log:from-body', 'log:bare']);
  });

  it('takes session.id from the resource, a record attribute overriding it', () => {
    const parsed = parseOtlpLogs(
      logs(
        [
          apiRequest({ requestId: 'inherits', sessionId: null }),
          apiRequest({ requestId: 'own', sessionId: 'own-id' }),
        ],
        [kv('session.id', s('resource-id')), kv('service.name', s('claude-code'))],
      ),
      NOW,
    );
    expect(parsed.records.map((r) => r.engineSessionId)).toEqual(['resource-id', 'own-id']);
  });

  it('has a null session and model when the record carries none', () => {
    const [record] = parseOtlpLogs(logs([apiRequest({ sessionId: null, model: null })]), NOW).records;
    expect(record?.engineSessionId).toBeNull();
    expect(record?.model).toBeNull();
  });

  it.each([
    ['negative', i(-5)],
    ['negative (as a string)', i('-5')],
    ['fractional', dbl(12.5)],
    ['huge (beyond MAX_SAFE_INTEGER, as a number)', i(Number.MAX_SAFE_INTEGER + 2)],
    ['huge (beyond MAX_SAFE_INTEGER, as a string)', i('9007199254740993')],
    ['huge (19 digits)', i('9999999999999999999')],
    ['a stringValue', s('12')],
    ['a boolean', { boolValue: true }],
    ['infinite', dbl(Number.POSITIVE_INFINITY)],
  ])('rejects a token count that is %s with a warning, and still reads the other records', (_, bad) => {
    for (const field of ['input', 'output', 'cacheRead', 'cacheCreation'] as const) {
      const parsed = parseOtlpLogs(
        logs([
          apiRequest({ requestId: 'before' }),
          apiRequest({ requestId: 'bad', [field]: bad }),
          apiRequest({ requestId: 'after' }),
        ]),
        NOW,
      );
      expect(
        parsed.records.map((r) => r.sourceId),
        field,
      ).toEqual(['log:before', 'log:after']);
      expect(parsed.rejected, field).toBe(1);
      expect(parsed.warnings, field).toEqual([
        '1 × api_request events with a token count that is not a non-negative integer',
      ]);
    }
  });

  it('counts each rejected record once, in one warning line with the count', () => {
    const parsed = parseOtlpLogs(
      logs([
        apiRequest({ requestId: 'a', input: i(-1), output: i(-1) }),
        apiRequest({ requestId: 'b', output: dbl(0.5) }),
        apiRequest({ requestId: 'c', cacheRead: s('x') }),
        apiRequest({ requestId: 'ok' }),
      ]),
      NOW,
    );
    expect(parsed.records.map((r) => r.sourceId)).toEqual(['log:ok']);
    expect(parsed.rejected).toBe(3);
    expect(parsed.warnings).toEqual([
      '3 × api_request events with a token count that is not a non-negative integer',
    ]);
  });

  // An intValue string that is not an integer (20+ digits, "12.5", "1e3", "abc"), or a doubleValue
  // string that is not a finite number, is unreadable: rejected, never read as 0.
  it.each([
    ['intValue of 20 digits', i('12345678901234567890')],
    ['intValue with a decimal', i('12.5')],
    ['intValue with an exponent', i('1e3')],
    ['intValue not a number', i('abc')],
    ['doubleValue "Infinity"', dbl('Infinity')],
    ['doubleValue "NaN"', dbl('NaN')],
  ])('rejects a malformed count (%s) rather than reading it as 0', (_, bad) => {
    const parsed = parseOtlpLogs(logs([apiRequest({ input: bad })]), NOW);
    expect(parsed.records).toEqual([]);
    expect(parsed.rejected).toBe(1);
  });

  it('never puts values in its warnings', () => {
    const parsed = parseOtlpLogs(
      logs([
        apiRequest({
          input: i('-777777'),
          sessionId: 'secret-session-zzz',
          timeUnixNano: '1',
          timestamp: null,
        }),
      ]),
      NOW,
    );
    const text = parsed.warnings.join('\n');
    expect(text).not.toContain('777777');
    expect(text).not.toContain('secret-session-zzz');
  });

  describe('source ids without a request id', () => {
    it('uses the session, the prompt and the event sequence when they are there', () => {
      const [record] = parseOtlpLogs(logs([apiRequest({ requestId: null, sequence: 7 })]), NOW).records;
      expect(record?.sourceId).toBe(`log:${SESSION}:prompt-1:7`);
    });

    it('keeps two engine processes of one session apart (each restarts the sequence)', () => {
      const ids = parseOtlpLogs(
        logs([
          apiRequest({ requestId: null, sequence: 1, promptId: 'first-turn' }),
          apiRequest({ requestId: null, sequence: 1, promptId: 'second-turn' }),
        ]),
        NOW,
      ).records.map((r) => r.sourceId);
      expect(new Set(ids).size).toBe(2);
    });

    it('falls back to a digest of the record: stable across parses, distinct per record', () => {
      const body = logs([
        apiRequest({ requestId: null, sequence: null, input: i(1) }),
        apiRequest({ requestId: null, sequence: null, input: i(2) }),
        apiRequest({ requestId: null, sessionId: null, sequence: 3 }),
      ]);
      const first = parseOtlpLogs(body, NOW).records.map((r) => r.sourceId);
      const again = parseOtlpLogs(structuredClone(body), NOW + 3_600_000).records.map((r) => r.sourceId);
      expect(first).toHaveLength(3);
      for (const id of first) expect(id).toMatch(/^log:sha:[0-9a-f]{24}$/);
      expect(new Set(first).size).toBe(3);
      expect(again).toEqual(first);
    });

    it('ignores an empty or over-long request id', () => {
      const parsed = parseOtlpLogs(
        logs([
          apiRequest({ requestId: '', sequence: 1 }),
          apiRequest({ requestId: 'r'.repeat(257), sequence: 2 }),
        ]),
        NOW,
      );
      expect(parsed.records.map((r) => r.sourceId)).toEqual([
        `log:${SESSION}:prompt-1:1`,
        `log:${SESSION}:prompt-1:2`,
      ]);
    });
  });

  describe('time', () => {
    it('prefers event.timestamp, else timeUnixNano', () => {
      const parsed = parseOtlpLogs(
        logs([
          apiRequest({ requestId: 'iso', timestamp: '2026-12-02T23:41:00.123Z', timeUnixNano: nanos(T0) }),
          apiRequest({ requestId: 'nanos', timestamp: null, timeUnixNano: nanos(T0 + 42) }),
          apiRequest({ requestId: 'bad-iso', timestamp: 'yesterday', timeUnixNano: nanos(T0 + 7) }),
          apiRequest({ requestId: 'number', timestamp: null, timeUnixNano: (T0 + 9) * 1_000_000 }),
        ]),
        NOW,
      );
      expect(parsed.records.map((r) => r.at)).toEqual([
        '2026-12-02T23:41:00.123Z',
        new Date(T0 + 42).toISOString(),
        new Date(T0 + 7).toISOString(),
        new Date(T0 + 9).toISOString(),
      ]);
      expect(parsed.warnings).toEqual([]);
    });

    it.each<[string, ApiRequest]>([
      ['in 1970', { timestamp: null, timeUnixNano: '1000000000' }],
      ['zero', { timestamp: null, timeUnixNano: '0' }],
      ['in 1999 (ISO)', { timestamp: '1999-12-31T23:59:59.000Z' }],
      ['two days ahead', { timestamp: null, timeUnixNano: nanos(NOW + 2 * 86_400_000) }],
      ['far in the future', { timestamp: '2999-01-01T00:00:00.000Z' }],
      ['missing', { timestamp: null, timeUnixNano: null }],
      ['not a number', { timestamp: null, timeUnixNano: 'soon' }],
      ['an object', { timestamp: null, timeUnixNano: { low: 1 } }],
    ])('dates a record whose time is %s when received, with a clock-skew warning', (_, o) => {
      const parsed = parseOtlpLogs(logs([apiRequest(o)]), NOW);
      expect(parsed.records.map((r) => r.at)).toEqual([NOW_ISO]);
      expect(parsed.rejected).toBe(0);
      expect(parsed.warnings).toEqual([
        '1 × records with a missing or implausible timestamp were dated when received (clock skew?)',
      ]);
    });

    it('keeps a time up to a day ahead of the receiver', () => {
      const ahead = NOW + 23 * 3_600_000;
      const parsed = parseOtlpLogs(logs([apiRequest({ timestamp: new Date(ahead).toISOString() })]), NOW);
      expect(parsed.records[0]?.at).toBe(new Date(ahead).toISOString());
      expect(parsed.warnings).toEqual([]);
    });
  });

  it('reads a very large export (50k records)', () => {
    const records = Array.from({ length: 50_000 }, (_, n) =>
      apiRequest({ requestId: `req_${n}`, input: i(String(n)), sequence: n }),
    );
    const parsed = parseOtlpLogs(logs(records), NOW);
    expect(parsed.records).toHaveLength(50_000);
    expect(parsed.rejected).toBe(0);
    expect(new Set(parsed.records.map((r) => r.sourceId)).size).toBe(50_000);
    expect(total(parsed.records).inputTokens).toBe((49_999 * 50_000) / 2);
  });

  it('survives strange shapes without throwing, reading what it can', () => {
    const good = apiRequest({ requestId: 'good' });
    const body = {
      resourceLogs: [
        null,
        1,
        'x',
        [],
        { resource: 'not an object', scopeLogs: 'not an array' },
        { resource: { attributes: 'nope' }, scopeLogs: [null, 1, { logRecords: null }, { logRecords: {} }] },
        {
          resource: {
            attributes: [null, 1, 'k', { key: 1, value: s('x') }, { key: 'session.id' }, { value: s('v') }],
          },
          scopeLogs: [
            {
              logRecords: [
                null,
                1,
                'record',
                [],
                true,
                {},
                { attributes: 'not an array', body: s('claude_code.api_request') },
                { attributes: { key: 'event.name' }, body: { kvlistValue: {} } },
                { attributes: [kv('event.name', { arrayValue: { values: [] } })] },
                {
                  attributes: [
                    kv('event.name', s('api_request')),
                    kv('input_tokens', null),
                    kv('output_tokens', 'x'),
                  ],
                },
                {
                  attributes: [kv('k'.repeat(300), s('v')), kv('event.name', s('api_request'))],
                  timeUnixNano: [],
                },
                good,
              ],
            },
          ],
        },
      ],
    };
    let parsed: ReturnType<typeof parseOtlpLogs> | undefined;
    expect(() => {
      parsed = parseOtlpLogs(body, NOW);
    }).not.toThrow();
    // Records named api_request with nothing usable read as zero usage, never as a crash.
    expect(parsed?.records.map((r) => r.sourceId)).toContain('log:good');
    expect(parsed?.records.every((r) => Number.isSafeInteger(r.usage.inputTokens))).toBe(true);
  });
});

// ---- metrics ------------------------------------------------------------------------------------

describe('parseOtlpMetrics', () => {
  it('reads the token and cost counters of the real Claude Code 2.1.197 export', () => {
    const parsed = parseOtlpMetrics(fixture(METRICS), NOW);
    expect(parsed.rejected).toBe(0);
    expect(parsed.warnings).toEqual([]);
    expect(total(parsed.records)).toEqual(usage(321, 12, 40, 7));
    expect(parsed.records.reduce((sum, r) => sum + (r.costUsd ?? 0), 0)).toBeCloseTo(0.00196875, 12);
    for (const r of parsed.records) {
      expect(r.sourceId).toMatch(/^metric:[0-9a-f]{24}$/);
      expect(r.engineSessionId).toBe(SESSION);
      expect(r.model).toBe('claude-opus-4-8[1m]');
      expect(r.at).toBe('2026-12-02T23:40:20.986Z');
    }
  });

  // Claude Code starts each delta series when it is first recorded — in the real export the
  // cacheCreation point starts 1 ms after the others: the export's time, not the start, is the window.
  it('groups the real export into one record per (session, model, export window)', () => {
    const parsed = parseOtlpMetrics(fixture(METRICS), NOW);
    expect(parsed.records).toHaveLength(1);
    expect(parsed.records[0]?.usage).toEqual(usage(321, 12, 40, 7));
    expect(parsed.records[0]?.costUsd).toBe(0.00196875);
  });

  it('groups the points of one window into one record with the 4 token types and the cost', () => {
    const parsed = parseOtlpMetrics(
      metrics(window({ input: 321, output: 12, cacheRead: 40, cacheCreation: 7, cost: 0.00196875 })),
      NOW,
    );
    expect(parsed).toEqual({
      records: [
        {
          sourceId: expect.stringMatching(/^metric:[0-9a-f]{24}$/),
          at: new Date(T0 + 5000).toISOString(),
          engineSessionId: SESSION,
          model: 'claude-sonnet-4-5',
          usage: usage(321, 12, 40, 7),
          costUsd: 0.00196875,
        },
      ],
      rejected: 0,
      warnings: [],
    });
  });

  it('keeps one record per session, model and window, with stable source ids', () => {
    const body = metrics([
      ...window({ model: 'claude-sonnet-4-5', input: 1 }),
      ...window({ model: 'claude-haiku-4-5', input: 2 }),
      ...window({ sessionId: 'other-session', input: 3 }),
      ...window({ start: T0 + 5000, end: T0 + 10_000, input: 4 }),
      ...window({ input: 10 }), // the same window as the first again: summed into it
    ]);
    const parsed = parseOtlpMetrics(body, NOW);
    expect(parsed.records.map((r) => [r.engineSessionId, r.model, r.usage.inputTokens])).toEqual([
      [SESSION, 'claude-sonnet-4-5', 11],
      [SESSION, 'claude-haiku-4-5', 2],
      ['other-session', 'claude-sonnet-4-5', 3],
      [SESSION, 'claude-sonnet-4-5', 4],
    ]);
    expect(parsed.records[0]?.costUsd).toBeCloseTo(0.02, 12);
    const ids = parsed.records.map((r) => r.sourceId);
    expect(new Set(ids).size).toBe(4);
    expect(parseOtlpMetrics(structuredClone(body), NOW + 60_000).records.map((r) => r.sourceId)).toEqual(ids);
  });

  it('reads asInt as a string and as a number, and asDouble', () => {
    const parsed = parseOtlpMetrics(
      metrics([
        metric('claude_code.token.usage', [
          point({ type: 'input', value: '300', asInt: true }),
          point({ type: 'input', value: 21, asInt: true }),
          point({ type: 'output', value: 12 }),
          point({ type: 'reasoning', value: '4', asInt: true }),
        ]),
      ]),
      NOW,
    );
    expect(parsed.rejected).toBe(0);
    expect(parsed.records).toHaveLength(1);
    expect(parsed.records[0]?.usage).toEqual(usage(321, 12, 0, 0, 4));
    expect(parsed.records[0]?.costUsd).toBeNull();
  });

  it('takes session.id from the resource', () => {
    const parsed = parseOtlpMetrics(
      metrics(
        [metric('claude_code.token.usage', [point({ type: 'input', value: 5, sessionId: null })])],
        [kv('session.id', s('resource-id'))],
      ),
      NOW,
    );
    expect(parsed.records[0]?.engineSessionId).toBe('resource-id');
  });

  it('reads counters under another prefix and ignores other metrics', () => {
    const parsed = parseOtlpMetrics(
      metrics([
        metric('other_cli.token.usage', [point({ type: 'input', value: 5 })]),
        metric('claude_code.session.count', [point({ value: 1 })]),
        metric('claude_code.lines_of_code.count', [point({ type: 'added', value: 3 })]),
        metric('claude_code.active_time.total', [point({ type: 'cli', value: 0.5 })], 2),
        { name: 'claude_code.token.usage.extra', sum: { aggregationTemporality: 1, dataPoints: [point()] } },
      ]),
      NOW,
    );
    expect(parsed.rejected).toBe(0);
    expect(parsed.warnings).toEqual([]);
    expect(parsed.records.map((r) => r.usage.inputTokens)).toEqual([5]);
  });

  it.each([
    ['cumulative', 2],
    ['unspecified', 0],
    ['missing', 'omit'],
    ['null', null],
    ['a string', 'AGGREGATION_TEMPORALITY_DELTA'],
  ])('rejects %s temporality with the temporality warning', (_, temporality) => {
    const parsed = parseOtlpMetrics(
      metrics([
        metric(
          'claude_code.token.usage',
          [point({ type: 'input', value: 100 }), point({ type: 'output', value: 10 })],
          temporality,
        ),
        metric('claude_code.cost.usage', [point({ value: 0.5 })], temporality),
        metric('other.token.usage', [point({ type: 'input', value: 7, end: T0 + 9000 })]),
      ]),
      NOW,
    );
    expect(parsed.records.map((r) => r.usage.inputTokens)).toEqual([7]);
    expect(parsed.rejected).toBe(3);
    expect(parsed.warnings).toEqual([
      "2 × claude_code.token.usage points that are not delta counters (set the exporter's temporality to delta)",
      "1 × claude_code.cost.usage points that are not delta counters (set the exporter's temporality to delta)",
    ]);
  });

  it('rejects points of an unknown token type, or with a fractional or negative value', () => {
    const parsed = parseOtlpMetrics(
      metrics([
        metric('claude_code.token.usage', [
          point({ type: 'input', value: 100 }),
          point({ type: 'thinking', value: 5 }),
          point({ type: null, value: 5 }),
          point({ type: '__proto__', value: 5 }),
          point({ type: 'toString', value: 5 }),
          point({ type: 'output', value: 1.5 }),
          point({ type: 'output', value: -1 }),
          point({ type: 'output', value: Number.MAX_SAFE_INTEGER + 2 }),
          point({ type: 'output', value: '-3', asInt: true }),
          point({ type: 'output', value: 'many', asInt: true }),
        ]),
        metric('claude_code.cost.usage', [point({ value: -0.5 }), point({ value: 0.25 })]),
      ]),
      NOW,
    );
    expect(parsed.records).toHaveLength(1);
    expect(parsed.records[0]?.usage).toEqual(usage(100, 0, 0, 0));
    expect(parsed.records[0]?.costUsd).toBe(0.25);
    expect(parsed.rejected).toBe(10);
    expect(parsed.warnings).toEqual([
      '6 × claude_code.token.usage points of an unknown type or with a fractional count',
      '3 × claude_code.token.usage points without a non-negative value',
      '1 × claude_code.cost.usage points without a non-negative value',
    ]);
  });

  it.each([
    ['null', null],
    ['an array', []],
    ['a string', 'x'],
    ['an empty object', {}],
    ['a logs payload', { resourceLogs: [] }],
  ])('answers %s with a warning, not a crash', (_, body) => {
    expect(parseOtlpMetrics(body, NOW)).toEqual({
      records: [],
      rejected: 0,
      warnings: ['not an OTLP metrics payload (no resourceMetrics array)'],
    });
  });

  it('dates a window whose end is skewed when received, with a warning', () => {
    const parsed = parseOtlpMetrics(
      metrics([
        metric('claude_code.token.usage', [
          point({ type: 'input', value: 1, start: 0, end: 1000 }),
          point({ type: 'input', value: 2, end: NOW + 30 * 86_400_000 }),
        ]),
      ]),
      NOW,
    );
    expect(parsed.records.map((r) => r.at)).toEqual([NOW_ISO, NOW_ISO]);
    expect(parsed.rejected).toBe(0);
    expect(parsed.warnings).toEqual([
      '2 × records with a missing or implausible timestamp were dated when received (clock skew?)',
    ]);
  });

  it('survives strange shapes without throwing', () => {
    const body = {
      resourceMetrics: [
        null,
        'x',
        { resource: null, scopeMetrics: null },
        { scopeMetrics: [null, 1, { metrics: 'no' }, { metrics: {} }] },
        {
          resource: { attributes: { key: 'session.id' } },
          scopeMetrics: [
            {
              metrics: [
                null,
                1,
                [],
                { name: 42 },
                { name: 'claude_code.token.usage' },
                { name: 'claude_code.token.usage', sum: 'x' },
                { name: 'claude_code.token.usage', sum: { aggregationTemporality: 1, dataPoints: 'x' } },
                {
                  name: 'claude_code.token.usage',
                  sum: { aggregationTemporality: 1, dataPoints: [null, 1, {}] },
                },
                { name: 'claude_code.token.usage', gauge: { dataPoints: [point({ type: 'input' })] } },
                {
                  name: 'claude_code.token.usage',
                  sum: {
                    aggregationTemporality: 1,
                    dataPoints: [
                      { attributes: 'x', asDouble: 3 },
                      { attributes: [kv('type', s('input'))], asDouble: 4 },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    let parsed: ReturnType<typeof parseOtlpMetrics> | undefined;
    expect(() => {
      parsed = parseOtlpMetrics(body, NOW);
    }).not.toThrow();
    expect(total(parsed?.records ?? []).inputTokens).toBe(4);
  });

  it('reads a large export (50k points)', () => {
    const points = Array.from({ length: 50_000 }, (_, n) =>
      point({ type: 'input', value: 2, end: T0 + 1000 + (n % 500), sessionId: `s-${n % 100}` }),
    );
    const parsed = parseOtlpMetrics(metrics([metric('claude_code.token.usage', points)]), NOW);
    expect(parsed.records).toHaveLength(500);
    expect(total(parsed.records).inputTokens).toBe(100_000);
  });
});
