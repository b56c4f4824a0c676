import { createRequire } from 'node:module';
import type * as GenaiPrices from '@pydantic/genai-prices';
import type { Usage } from '../core/events.js';

/**
 * List prices from `@pydantic/genai-prices` (pinned in package.json; its embedded dataset, never
 * fetched at run time): Anthropic, OpenAI, Google and the rest, with dated price changes and tiers.
 * The library's own `calcPrice` takes ~30 µs a call — too slow for a scan of 400,000 requests — so
 * it is asked once per model which entry it is, and the cost of each request is computed here from
 * that entry's prices, with the library's rules: a price of the time of the request (start-date and
 * time-of-day constraints), and a tiered price at the rate of the highest tier the request's input
 * tokens (cache included) pass, for all its tokens of that kind. Loaded on first use (the library is
 * ~0.5 MB of data): commands that price nothing never load it.
 */

/** The pinned package and the day that version was published (its data is as of then). */
export const DATASET = { name: '@pydantic/genai-prices', version: '0.1.8', date: '2026-09-23' } as const;

type Lib = typeof GenaiPrices;
type ModelInfo = GenaiPrices.ModelInfo;
type ModelPriceEntry = GenaiPrices.ModelPrice;
type Tiered = { base: number; tiers: Array<{ start: number; price: number }> };

let lib: Lib | null = null;
function load(): Lib {
  lib ??= createRequire(import.meta.url)('@pydantic/genai-prices') as Lib;
  return lib;
}

/** One model's price at one moment: what a request's usage costs, in USD. */
export interface Rate {
  /** Stored with each row it prices: `genai-prices@<version>:<provider>/<model>`. */
  key: string;
  /**
   * `perRequest`: the usage is one request's, so a tier applies by its input. A row that adds up
   * several requests (a turn's totals) is priced at the base rates: its size says nothing of theirs.
   */
  cost(usage: Usage, perRequest?: boolean): number;
  /** The price of one more output token of this row (to reprice a later, larger count). */
  outputUnit(usage: Usage, perRequest?: boolean): number;
}

const ZERO = { input_tokens: 0, output_tokens: 0 };

/** The catalogue: which entry a model id is (cached; null when the dataset does not know it). */
export class GenaiCatalog {
  private readonly models = new Map<string, { provider: string; info: ModelInfo } | null>();
  private readonly rates = new Map<ModelPriceEntry, Rate>();

  lookup(modelKey: string, at: Date): Rate | undefined {
    let found = this.models.get(modelKey);
    if (found === undefined) {
      const result = load().calcPrice(ZERO, modelKey, { timestamp: at });
      found = result ? { provider: result.provider.id, info: result.model } : null;
      this.models.set(modelKey, found);
    }
    if (!found) return undefined;
    const prices = pricesAt(found.info, at);
    let rate = this.rates.get(prices);
    if (!rate) {
      rate = rateOf(`genai-prices@${DATASET.version}:${found.provider}/${found.info.id}`, prices);
      this.rates.set(prices, rate);
    }
    return rate;
  }
}

/** The entry's prices in force at `at` (the library's rule: the last constraint that holds wins). */
export function pricesAt(info: Pick<ModelInfo, 'id' | 'prices'>, at: Date): ModelPriceEntry {
  if (!Array.isArray(info.prices)) return info.prices;
  for (let i = info.prices.length - 1; i >= 0; i--) {
    const entry = info.prices[i];
    if (!entry) continue;
    const c = entry.constraint;
    if (c === undefined) return entry.prices;
    if (c.type === 'start_date' && at >= new Date(c.start_date)) return entry.prices;
    if (c.type === 'time_of_date' && withinTimeOfDay(at, c.start_time, c.end_time)) return entry.prices;
  }
  const first = info.prices[0];
  if (!first) throw new Error(`the price entry of ${info.id} has no prices`);
  return first.prices;
}

function withinTimeOfDay(at: Date, start: string, end: string): boolean {
  const now = at.getUTCHours() * 3600 + at.getUTCMinutes() * 60 + at.getUTCSeconds();
  const [s, e] = [seconds(start), seconds(end)];
  return e < s ? now >= s || now < e : now >= s && now < e;
}

function seconds(time: string): number {
  const [h = 0, m = 0, s = 0] = time.split(':').map(Number);
  return h * 3600 + m * 60 + s;
}

/** USD per token of one kind for a request whose input (cache included) is `input` tokens. */
function perToken(price: number | Tiered | undefined, input: number): number | undefined {
  if (price === undefined) return undefined;
  if (typeof price === 'number') return price / 1_000_000;
  let rate = price.base;
  for (const tier of price.tiers) if (input > tier.start) rate = tier.price;
  return rate / 1_000_000;
}

/**
 * Our usage kinds are disjoint (input excludes cache reads and writes; reasoning is billed as
 * output). Cache tokens without a price of their own are billed as input, as the library does.
 * Cache writes are priced at the 5-minute rate: transcripts do not say which lifetime was used.
 */
export function rateOf(key: string, prices: ModelPriceEntry): Rate {
  const get = (name: string) => prices[name] as number | Tiered | undefined;
  const rates = (usage: Usage, perRequest = true) => {
    const input = perRequest ? usage.inputTokens + usage.cacheReadTokens + usage.cacheCreationTokens : 0;
    const inPrice = perToken(get('input_mtok'), input) ?? 0;
    return {
      input: inPrice,
      output: perToken(get('output_mtok'), input) ?? 0,
      cacheRead: perToken(get('cache_read_mtok'), input) ?? inPrice,
      cacheWrite: perToken(get('cache_write_mtok'), input) ?? inPrice,
    };
  };
  return {
    key,
    cost(usage, perRequest) {
      const r = rates(usage, perRequest);
      return (
        usage.inputTokens * r.input +
        (usage.outputTokens + usage.reasoningTokens) * r.output +
        usage.cacheReadTokens * r.cacheRead +
        usage.cacheCreationTokens * r.cacheWrite
      );
    },
    outputUnit: (usage, perRequest) => rates(usage, perRequest).output,
  };
}
