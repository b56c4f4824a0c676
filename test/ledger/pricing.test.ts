import { describe, expect, it } from 'vitest';
import type { Usage } from '../../src/core/events.js';
import {
  BUILTIN_PRICES,
  listPriceCost,
  type ModelPrice,
  modelKey,
  pricesFromConfig,
  priceTable,
} from '../../src/ledger/pricing.js';

const usage = (partial: Partial<Usage>): Usage => ({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
  ...partial,
});

const builtin = (key: string): ModelPrice => {
  const price = BUILTIN_PRICES[key];
  if (!price) throw new Error(`no built-in price for ${key}`);
  return price;
};

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

  it('keeps minor versions: claude-opus-4-8 is not claude-opus-4 and has no price', () => {
    expect(modelKey('claude-opus-4-8')).toBe('claude-opus-4-8');
    expect(modelKey('claude-opus-4-8-20260101')).toBe('claude-opus-4-8');
    expect(priceTable().lookup('claude-opus-4-8')).toBeUndefined();
    expect(priceTable().lookup('us.anthropic.claude-opus-4-8-20260101-v1:0')).toBeUndefined();
  });

  it('a dated minor version finds its own price, not the major one', () => {
    // claude-opus-4-5 ($5/$25) must not fall back to claude-opus-4 ($15/$75).
    expect(priceTable().lookup('claude-opus-4-5-20251101')).toEqual({
      key: 'claude-opus-4-5',
      price: builtin('claude-opus-4-5'),
    });
    expect(builtin('claude-opus-4-5').input).toBe(5);
    expect(builtin('claude-opus-4').input).toBe(15);
  });

  it('does not strip digits that are not an 8-digit date', () => {
    expect(modelKey('my-model-1234567')).toBe('my-model-1234567');
    expect(modelKey('my-model-123456789')).toBe('my-model-123456789');
  });
});

describe('priceTable', () => {
  it('looks up built-in prices through modelKey, with the key it matched', () => {
    const table = priceTable();
    expect(table.lookup('us.anthropic.claude-sonnet-4-5-20250929-v1:0')).toEqual({
      key: 'claude-sonnet-4-5',
      price: builtin('claude-sonnet-4-5'),
    });
    expect(table.lookup('gpt-5-codex')?.price.input).toBe(1.25);
    expect(table.lookup('gemini-2.5-flash')?.price.output).toBe(2.5);
    expect(table.lookup('no-such-model')).toBeUndefined();
    expect(table.lookup('')).toBeUndefined();
  });

  it('built-in Anthropic cache prices follow the multipliers (read 0.1×, 5m write 1.25×, 1h write 2×)', () => {
    expect(builtin('claude-sonnet-4-5')).toMatchObject({
      input: 3,
      output: 15,
      cacheRead: 0.3,
      cacheWrite5m: 3.75,
      cacheWrite1h: 6,
    });
    expect(builtin('claude-3-5-haiku')).toMatchObject({
      cacheRead: 0.08,
      cacheWrite5m: 1,
      cacheWrite1h: 1.6,
    });
    for (const [key, price] of Object.entries(BUILTIN_PRICES)) {
      expect(modelKey(key), key).toBe(key);
      expect(price.asOf, key).toMatch(/^\d{4}-\d{2}(-\d{2})?$/);
      expect(price.source, key).toMatch(/^https:\/\//);
    }
  });

  it('a config override replaces a built-in price and adds a new model; others stay built-in', () => {
    const table = priceTable(
      pricesFromConfig({
        // Keys go through modelKey too: a dated, upper-case key overrides the built-in entry.
        'Claude-Sonnet-4-5-20250929': { input: 2, output: 10, asOf: '2026-01', source: 'contract' },
        'local/llama-3': { input: 0.1, output: 0.2, cacheRead: 0.01, asOf: '2026-02-01', source: 'ops' },
      }),
    );
    expect(table.lookup('claude-sonnet-4-5')).toEqual({
      key: 'claude-sonnet-4-5',
      price: {
        input: 2,
        output: 10,
        cacheRead: 2,
        cacheWrite5m: 2,
        cacheWrite1h: 2,
        asOf: '2026-01',
        source: 'contract',
      },
    });
    expect(table.lookup('LOCAL/llama-3')?.price).toMatchObject({ input: 0.1, cacheRead: 0.01 });
    expect(table.lookup('claude-haiku-4-5')?.price).toBe(builtin('claude-haiku-4-5'));
    // The built-in table itself is untouched by an override.
    expect(builtin('claude-sonnet-4-5').input).toBe(3);
    expect(priceTable().lookup('local/llama-3')).toBeUndefined();
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

describe('listPriceCost', () => {
  const sonnet = builtin('claude-sonnet-4-5');

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
