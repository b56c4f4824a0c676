import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Usage } from '../../src/core/events.js';
import { DATASET, pricesAt, rateOf, secondsUtc } from '../../src/ledger/genai-prices.js';
import {
  listPriceCost,
  type ModelPrice,
  modelKey,
  pricesFromConfig,
  priceTable,
} from '../../src/ledger/pricing.js';
import { usage } from '../helpers/usage.js';

const sonnet: ModelPrice = {
  input: 3,
  output: 15,
  cacheRead: 0.3,
  cacheWrite5m: 3.75,
  cacheWrite1h: 6,
  asOf: '2026-01',
  source: 'test',
};
const MILLION = usage({ inputTokens: 1_000_000 });

describe('modelKey', () => {
  it.each([
    ['claude-sonnet-4-5-20250929', 'claude-sonnet-4-5'],
    ['claude-sonnet-4-5@20250929', 'claude-sonnet-4-5'],
    ['us.anthropic.claude-sonnet-4-5-20250929-v1:0', 'claude-sonnet-4-5'],
    ['eu.anthropic.claude-haiku-4-5-20251001-v1:0', 'claude-haiku-4-5'],
    ['anthropic.claude-opus-4-1-20250805-v1:0', 'claude-opus-4-1'],
    // Bedrock's global and APAC cross-region inference profiles.
    ['global.anthropic.claude-sonnet-4-5-20250929-v1:0', 'claude-sonnet-4-5'],
    ['apac.anthropic.claude-sonnet-4-20250514-v1:0', 'claude-sonnet-4'],
    ['us-gov.anthropic.claude-3-7-sonnet-20250219-v1:0', 'claude-3-7-sonnet'],
    ['anthropic/claude-sonnet-4-5', 'claude-sonnet-4-5'],
    ['openai/gpt-5-codex', 'gpt-5-codex'],
    ['models/gemini-2.5-pro', 'gemini-2.5-pro'],
    ['Claude-Sonnet-4-5-20250929', 'claude-sonnet-4-5'],
    ['  CLAUDE-OPUS-4-5  ', 'claude-opus-4-5'],
    ['ANTHROPIC/Claude-Haiku-4-5@20251001', 'claude-haiku-4-5'],
    ['gpt-5.1', 'gpt-5.1'],
  ])('%s → %s', (model, key) => {
    expect(modelKey(model)).toBe(key);
  });

  it('keeps minor versions: claude-opus-4-8 is priced as itself', () => {
    expect(modelKey('claude-opus-4-8')).toBe('claude-opus-4-8');
    expect(modelKey('claude-opus-4-8-20260101')).toBe('claude-opus-4-8');
    expect(priceTable().lookup('claude-opus-4-8')?.key).toBe(
      `genai-prices@${DATASET.version}:anthropic/claude-opus-4-8`,
    );
    expect(priceTable().lookup('us.anthropic.claude-opus-4-8-20260101-v1:0')?.key).toMatch(
      /claude-opus-4-8$/,
    );
  });

  it('a dated minor version finds its own price, not the major one', () => {
    // claude-opus-4-5 ($5/$25) must not fall back to claude-opus-4 ($15/$75).
    expect(priceTable().lookup('claude-opus-4-5-20251101')?.cost(MILLION)).toBeCloseTo(5, 10);
    expect(priceTable().lookup('claude-opus-4')?.cost(MILLION)).toBeCloseTo(15, 10);
  });

  it('does not strip digits that are not an 8-digit date', () => {
    expect(modelKey('my-model-1234567')).toBe('my-model-1234567');
    expect(modelKey('my-model-123456789')).toBe('my-model-123456789');
  });
});

describe('priceTable (@pydantic/genai-prices)', () => {
  const at = '2026-11-01T12:00:00Z';

  it("prices today's models of each vendor through modelKey; an unknown one is undefined", () => {
    const table = priceTable();
    const cost = (model: string, u: Partial<Usage>) => table.lookup(model, at)?.cost(usage(u));
    // Anthropic: input 5, output 25, cache read 0.5, 5-minute cache write 6.25 per million.
    expect(cost('claude-opus-4-8', { inputTokens: 1_000_000 })).toBeCloseTo(5, 10);
    expect(cost('claude-opus-4-8', { outputTokens: 1_000_000 })).toBeCloseTo(25, 10);
    expect(cost('claude-opus-4-8', { cacheReadTokens: 1_000_000 })).toBeCloseTo(0.5, 10);
    expect(cost('claude-opus-4-8', { cacheCreationTokens: 1_000_000 })).toBeCloseTo(6.25, 10);
    expect(cost('us.anthropic.claude-sonnet-4-5-20250929-v1:0', { inputTokens: 1000 })).toBeCloseTo(
      0.003,
      10,
    );
    expect(cost('claude-haiku-4-5-20251001', { outputTokens: 1000 })).toBeCloseTo(0.005, 10);
    expect(cost('gpt-5.1-codex', { inputTokens: 1_000_000 })).toBeCloseTo(1.25, 10);
    expect(cost('gemini-2.5-pro', { inputTokens: 100_000 })).toBeCloseTo(0.125, 10);
    expect(table.lookup('no-such-model', at)).toBeUndefined();
    expect(table.lookup('', at)).toBeUndefined();
  });

  it("agrees with the library's own calcPrice, tiers included", () => {
    const lib = createRequire(import.meta.url)(
      '@pydantic/genai-prices',
    ) as typeof import('@pydantic/genai-prices');
    const table = priceTable();
    const cases: Array<[string, Partial<Usage>]> = [
      [
        'claude-sonnet-4-5',
        { inputTokens: 1200, outputTokens: 300, cacheReadTokens: 40_000, cacheCreationTokens: 2000 },
      ],
      // Over 200k input tokens (cache included): every token at the long-context rate.
      ['claude-sonnet-4-5', { inputTokens: 150_000, outputTokens: 5000, cacheReadTokens: 60_000 }],
      ['gemini-2.5-pro', { inputTokens: 250_000, outputTokens: 8000, reasoningTokens: 2000 }],
      [
        'gpt-5.1-codex',
        { inputTokens: 9000, outputTokens: 700, cacheReadTokens: 30_000, reasoningTokens: 300 },
      ],
    ];
    for (const [model, u] of cases) {
      const x = usage(u);
      const theirs = lib.calcPrice(
        {
          input_tokens: x.inputTokens + x.cacheReadTokens + x.cacheCreationTokens,
          cache_read_tokens: x.cacheReadTokens,
          cache_write_tokens: x.cacheCreationTokens,
          output_tokens: x.outputTokens + x.reasoningTokens,
        },
        model,
        { timestamp: new Date(at) },
      );
      expect(table.lookup(model, at)?.cost(x), model).toBeCloseTo(theirs?.total_price ?? Number.NaN, 12);
    }
  });

  it('prices by the time of day where the dataset does (DeepSeek off-peak), as calcPrice does', () => {
    const lib = createRequire(import.meta.url)(
      '@pydantic/genai-prices',
    ) as typeof import('@pydantic/genai-prices');
    const table = priceTable();
    const x = usage({ inputTokens: 1_000_000, outputTokens: 200_000, cacheReadTokens: 300_000 });
    const costs = new Set<number>();
    for (const hour of ['00:10', '01:00', '07:00', '16:29', '16:31', '23:59']) {
      const at = `2026-11-01T${hour}:00Z`;
      const theirs = lib.calcPrice(
        { input_tokens: 1_300_000, cache_read_tokens: 300_000, output_tokens: 200_000 },
        'deepseek-chat',
        { timestamp: new Date(at) },
      );
      const ours = table.lookup('deepseek-chat', at)?.cost(x) ?? Number.NaN;
      expect(ours, at).toBeCloseTo(theirs?.total_price ?? Number.NaN, 12);
      costs.add(Math.round(ours * 1e9));
    }
    // Not vacuous: the price did change with the hour.
    expect(costs.size).toBeGreaterThan(1);
    expect(secondsUtc('00:30:00Z')).toBe(1800);
    expect(secondsUtc('08:30:00+08:00')).toBe(1800);
    expect(secondsUtc('23:00:00.5-01:00')).toBe(0.5);
  });

  it('an entry without token prices (speech) is unknown, never $0', () => {
    expect(priceTable().lookup('whisper-1')).toBeUndefined();
  });

  it('prices a request at its time: the last constraint in force wins', () => {
    const info = {
      id: 'm',
      match: { equals: 'm' },
      prices: [
        { prices: { input_mtok: 1 } },
        { constraint: { type: 'start_date' as const, start_date: '2026-06-01' }, prices: { input_mtok: 2 } },
      ],
    };
    expect(pricesAt(info, new Date('2026-05-31T23:59:59Z'))).toEqual({ input_mtok: 1 });
    expect(pricesAt(info, new Date('2026-06-01T00:00:00Z'))).toEqual({ input_mtok: 2 });
    expect(rateOf('k', { input_mtok: 2 }).cost(MILLION)).toBeCloseTo(2, 10);
  });

  it("a config price overrides the dataset and adds a model; others stay the dataset's", () => {
    const table = priceTable(
      pricesFromConfig({
        // Keys go through modelKey too: a dated, upper-case key overrides the dataset's entry.
        'Claude-Sonnet-4-5-20250929': { input: 2, output: 10, asOf: '2026-01', source: 'contract' },
        'local/llama-3': { input: 0.1, output: 0.2, cacheRead: 0.01, asOf: '2026-02-01', source: 'ops' },
      }),
    );
    expect(table.lookup('claude-sonnet-4-5')?.key).toBe('claude-sonnet-4-5@2026-01');
    expect(table.lookup('claude-sonnet-4-5')?.cost(MILLION)).toBeCloseTo(2, 10);
    expect(table.lookup('LOCAL/llama-3')?.cost(usage({ cacheReadTokens: 1_000_000 }))).toBeCloseTo(0.01, 10);
    expect(table.lookup('claude-haiku-4-5')?.key).toMatch(/^genai-prices@/);
    expect(table.sources.configured).toEqual(['claude-sonnet-4-5', 'local/llama-3']);
    expect(priceTable().lookup('local/llama-3')).toBeUndefined();
  });

  it('names the pinned dataset: its version is the one installed', () => {
    const installed = JSON.parse(
      readFileSync(
        join(import.meta.dirname, '../../node_modules/@pydantic/genai-prices/package.json'),
        'utf8',
      ),
    ) as { version: string };
    const pinned = JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(pinned.dependencies['@pydantic/genai-prices']).toBe(DATASET.version);
    expect(priceTable().sources.dataset).toEqual(DATASET);
    // Bumping the package means updating DATASET (its version and the date it was published).
    expect(installed.version).toBe(DATASET.version);
  });
});

describe('pricesFromConfig', () => {
  it('defaults unset cache prices to the input price and keeps set ones', () => {
    expect(
      pricesFromConfig({
        a: { input: 4, output: 8, asOf: '2026-01', source: 's' },
        b: {
          input: 4,
          output: 8,
          cacheRead: 0.4,
          cacheWrite5m: 5,
          cacheWrite1h: undefined,
          asOf: '2026-01-15',
          source: 't',
        },
        c: { input: 4, output: 8, cacheRead: 0, asOf: '2026-01', source: 'free cache reads' },
      }),
    ).toEqual({
      a: {
        input: 4,
        output: 8,
        cacheRead: 4,
        cacheWrite5m: 4,
        cacheWrite1h: 4,
        asOf: '2026-01',
        source: 's',
      },
      b: {
        input: 4,
        output: 8,
        cacheRead: 0.4,
        cacheWrite5m: 5,
        cacheWrite1h: 4,
        asOf: '2026-01-15',
        source: 't',
      },
      // An explicit 0 is a price, not "unset".
      c: {
        input: 4,
        output: 8,
        cacheRead: 0,
        cacheWrite5m: 4,
        cacheWrite1h: 4,
        asOf: '2026-01',
        source: 'free cache reads',
      },
    });
  });
});

describe('listPriceCost (config prices)', () => {
  it('1,000,000 of every kind of claude-sonnet-4-5: reasoning at the output price, cache writes at 5m', () => {
    const million = usage({
      inputTokens: 1_000_000,
      outputTokens: 1_000_000,
      cacheReadTokens: 1_000_000,
      cacheCreationTokens: 1_000_000,
      reasoningTokens: 1_000_000,
    });
    // 3 (input) + 15 (output) + 15 (reasoning as output) + 0.3 (cache read) + 3.75 (5m write)
    expect(listPriceCost(million, sonnet)).toBeCloseTo(37.05, 10);
  });

  it('prices each kind at its own rate (distinct counts tell a swapped rate apart)', () => {
    const cost = listPriceCost(
      usage({
        inputTokens: 1_000_000,
        outputTokens: 2_000_000,
        cacheReadTokens: 3_000_000,
        cacheCreationTokens: 4_000_000,
        reasoningTokens: 5_000_000,
      }),
      sonnet,
    );
    // 1×3 + (2+5)×15 + 3×0.3 + 4×3.75 = 3 + 105 + 0.9 + 15
    expect(cost).toBeCloseTo(123.9, 10);
    expect(listPriceCost(usage({ reasoningTokens: 1_000_000 }), sonnet)).toBeCloseTo(15, 10);
    expect(listPriceCost(usage({ cacheCreationTokens: 1_000_000 }), sonnet)).toBeCloseTo(3.75, 10);
    expect(listPriceCost(usage({ cacheReadTokens: 1_000_000 }), sonnet)).toBeCloseTo(0.3, 10);
    expect(listPriceCost(usage({ inputTokens: 1 }), sonnet)).toBeCloseTo(3e-6, 15);
    expect(listPriceCost(usage({}), sonnet)).toBe(0);
  });
});
