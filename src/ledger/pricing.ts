import type { Usage } from '../core/events.js';

/**
 * List prices as data, in USD per million tokens, each with the date it was read and where. A cost
 * computed from them is an estimate at list price (`costBasis: list-price`), never a charge: plans,
 * discounts, batch and long-context tiers are not modelled. Operators override or add models under
 * `pricing:` in the config. A model that is not in the table gets `cost: null` and a warning — never 0.
 */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead: number;
  /** Cache writes with the default 5-minute lifetime (transcripts do not say which lifetime was used). */
  cacheWrite5m: number;
  cacheWrite1h: number;
  /** When this price was read (YYYY-MM or YYYY-MM-DD). */
  asOf: string;
  source: string;
}

const ANTHROPIC = 'https://docs.anthropic.com/en/docs/about-claude/pricing';
const OPENAI = 'https://openai.com/api/pricing/';
const GOOGLE = 'https://ai.google.dev/gemini-api/docs/pricing';

const anthropic = (input: number, output: number): ModelPrice => ({
  input,
  output,
  // Anthropic's cache multipliers: read 0.1×, 5-minute write 1.25×, 1-hour write 2× the input price.
  cacheRead: round(input * 0.1),
  cacheWrite5m: round(input * 1.25),
  cacheWrite1h: round(input * 2),
  asOf: '2025-11',
  source: ANTHROPIC,
});

/** Vendors that bill no cache writes apart from input (OpenAI, Google): writes at the input price. */
const noCacheWrites =
  (source: string) =>
  (input: number, output: number, cacheRead: number): ModelPrice => ({
    input,
    output,
    cacheRead,
    cacheWrite5m: input,
    cacheWrite1h: input,
    asOf: '2025-11',
    source,
  });
const openai = noCacheWrites(OPENAI);
const google = noCacheWrites(GOOGLE);

/** Built-in prices, keyed by model id without a date suffix (see `modelKey`). Standard tier, ≤200k context. */
export const BUILTIN_PRICES: Readonly<Record<string, ModelPrice>> = {
  'claude-opus-4-5': anthropic(5, 25),
  'claude-opus-4-1': anthropic(15, 75),
  'claude-opus-4': anthropic(15, 75),
  'claude-sonnet-4-5': anthropic(3, 15),
  'claude-sonnet-4': anthropic(3, 15),
  'claude-3-7-sonnet': anthropic(3, 15),
  'claude-haiku-4-5': anthropic(1, 5),
  'claude-3-5-haiku': anthropic(0.8, 4),
  'gpt-5': openai(1.25, 10, 0.125),
  'gpt-5-codex': openai(1.25, 10, 0.125),
  'gpt-5.1': openai(1.25, 10, 0.125),
  'gpt-5.1-codex': openai(1.25, 10, 0.125),
  'gpt-5-mini': openai(0.25, 2, 0.025),
  'gpt-5-nano': openai(0.05, 0.4, 0.005),
  'gemini-2.5-pro': google(1.25, 10, 0.31),
  'gemini-2.5-flash': google(0.3, 2.5, 0.03),
};

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

/**
 * The table key of a model id: lower case, without a provider prefix (`anthropic/`, Bedrock's
 * `us.anthropic.`, `apac.anthropic.`, `global.anthropic.`, `us-gov.anthropic.`) and without a date or version suffix (`-20250929`, `@20250929`, `-v1:0`). Minor
 * versions are kept: `claude-opus-4-8` is not `claude-opus-4` (another model, maybe another price).
 */
export function modelKey(model: string): string {
  return model
    .trim()
    .toLowerCase()
    .replace(/^(?:[a-z-]+\.)?anthropic[./]/, '')
    .replace(/^(?:openai|google|models)\//, '')
    .replace(/-v\d+(?::\d+)?$/, '')
    .replace(/[-@]\d{8}$/, '');
}

/** Config entries (`pricing:`) as table prices: unset cache prices default to the input price. */
export function pricesFromConfig(
  entries: Readonly<
    Record<
      string,
      {
        input: number;
        output: number;
        cacheRead?: number | undefined;
        cacheWrite5m?: number | undefined;
        cacheWrite1h?: number | undefined;
        asOf: string;
        source: string;
      }
    >
  >,
): Record<string, ModelPrice> {
  const out: Record<string, ModelPrice> = {};
  for (const [model, p] of Object.entries(entries)) {
    out[model] = {
      input: p.input,
      output: p.output,
      cacheRead: p.cacheRead ?? p.input,
      cacheWrite5m: p.cacheWrite5m ?? p.input,
      cacheWrite1h: p.cacheWrite1h ?? p.input,
      asOf: p.asOf,
      source: p.source,
    };
  }
  return out;
}

export interface PriceTable {
  lookup(model: string): { key: string; price: ModelPrice } | undefined;
}

export function priceTable(overrides: Readonly<Record<string, ModelPrice>> = {}): PriceTable {
  const table = new Map<string, ModelPrice>();
  for (const [key, price] of Object.entries(BUILTIN_PRICES)) table.set(modelKey(key), price);
  for (const [key, price] of Object.entries(overrides)) table.set(modelKey(key), price);
  return {
    lookup(model) {
      const key = modelKey(model);
      const price = table.get(key);
      return price ? { key, price } : undefined;
    },
  };
}

/**
 * Estimated cost at list price. Kinds are disjoint in `Usage`: reasoning tokens are billed as output
 * (OpenAI, Google); cache creation at the 5-minute write price.
 */
export function listPriceCost(usage: Usage, price: ModelPrice): number {
  const perToken =
    usage.inputTokens * price.input +
    (usage.outputTokens + usage.reasoningTokens) * price.output +
    usage.cacheReadTokens * price.cacheRead +
    usage.cacheCreationTokens * price.cacheWrite5m;
  return perToken / 1_000_000;
}
