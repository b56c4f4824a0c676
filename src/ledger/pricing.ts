import type { Usage } from '../core/events.js';
import { DATASET, GenaiCatalog, type Rate } from './genai-prices.js';

export type { Rate } from './genai-prices.js';

/**
 * List prices. The dataset is `@pydantic/genai-prices` (genai-prices.ts: pinned, never fetched at
 * run time), priced at each request's time; operators override or add models under `pricing:` in the
 * config, in USD per million tokens, each with the date it was read and where. A cost computed from
 * them is an estimate at list price (`costBasis: list-price`), never a charge: plans, discounts and
 * batch prices are not modelled. A model neither knows gets `cost: null` and a warning — never 0.
 */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead: number;
  /** Cache writes with the default 5-minute lifetime (and those whose source does not say which). */
  cacheWrite5m: number;
  cacheWrite1h: number;
  /** When this price was read (YYYY-MM or YYYY-MM-DD). */
  asOf: string;
  source: string;
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
  /** The price of `model` at `at` (ISO 8601; default now); undefined when nothing prices it. */
  lookup(model: string, at?: string): Rate | undefined;
  /** Where the prices come from, for reports: the dataset, and the models the config prices. */
  readonly sources: { dataset: typeof DATASET; configured: string[] };
  /** Load the price data now rather than at the first row it prices. */
  warm(): void;
}

/** A config price as a rate: flat, whatever the time; stored as `<model>@<asOf>`. */
function configRate(key: string, price: ModelPrice): Rate {
  return {
    key: `${key}@${price.asOf}`,
    cost: (usage) => listPriceCost(usage, price),
    outputUnit: () => price.output / 1_000_000,
  };
}

/** Config prices first (they override), then the dataset. */
export function priceTable(
  overrides: Readonly<Record<string, ModelPrice>> = {},
  catalog: Pick<GenaiCatalog, 'lookup'> & Partial<Pick<GenaiCatalog, 'warm'>> = new GenaiCatalog(),
): PriceTable {
  const configured = new Map<string, Rate>();
  for (const [model, price] of Object.entries(overrides)) {
    const key = modelKey(model);
    configured.set(key, configRate(key, price));
  }
  // The same few model ids on every row: each normalised once.
  const keys = new Map<string, string>();
  const keyOf = (model: string): string => {
    let key = keys.get(model);
    if (key === undefined) {
      if (keys.size >= 10_000) keys.clear();
      key = modelKey(model);
      keys.set(model, key);
    }
    return key;
  };
  return {
    lookup(model, at) {
      const key = keyOf(model);
      return configured.get(key) ?? catalog.lookup(key, at);
    },
    sources: { dataset: DATASET, configured: [...configured.keys()] },
    warm: () => catalog.warm?.(),
  };
}

/**
 * Estimated cost at list price. Kinds are disjoint in `Usage`: reasoning tokens are billed as output
 * (OpenAI, Google); cache creation at the 5-minute write price, its 1-hour part (when the source
 * said) at the 1-hour price.
 */
export function listPriceCost(usage: Usage, price: ModelPrice): number {
  const oneHour = Math.min(usage.cacheCreation1hTokens ?? 0, usage.cacheCreationTokens);
  const perToken =
    usage.inputTokens * price.input +
    (usage.outputTokens + usage.reasoningTokens) * price.output +
    usage.cacheReadTokens * price.cacheRead +
    (usage.cacheCreationTokens - oneHour) * price.cacheWrite5m +
    oneHour * price.cacheWrite1h;
  return perToken / 1_000_000;
}
