import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as GenaiPrices from '@pydantic/genai-prices';
import type { Usage } from '../core/events.js';
import { type CompactDataset, type Found, findModel } from './genai-prices-data.js';

/**
 * List prices from `@pydantic/genai-prices` (pinned in package.json; its embedded dataset, never
 * fetched at run time): Anthropic, OpenAI, Google and the rest, with dated price changes and tiers.
 * The library's own `calcPrice` takes ~30 µs a call — too slow for a scan of 400,000 requests — so
 * it is asked once per model which entry it is, and the cost of each request is computed here from
 * that entry's prices, with the library's rules: a price of the time of the request (start-date and
 * time-of-day constraints), and a tiered price at the rate of the highest tier the request's input
 * tokens (cache included) pass, for all its tokens of that kind. Loaded on first use: commands that
 * price nothing never load it. Where the build wrote the dataset as JSON (dist/genai-prices.json,
 * genai-prices-data.ts: the same entries, found by the library's rule), that is read — a few ms
 * instead of the library's ~70 ms of CPU; else the library is required and asked.
 */

/** The pinned package and the day that version was published (its data is as of then). */
export const DATASET = { name: '@pydantic/genai-prices', version: '0.1.8', date: '2026-09-23' } as const;

type Lib = typeof GenaiPrices;
type MatchLogic = GenaiPrices.MatchLogic;
type ModelPriceEntry = GenaiPrices.ModelPrice;
type ModelEntry = Pick<GenaiPrices.ModelInfo, 'id' | 'prices'>;
type Tiered = { base: number; tiers: Array<{ start: number; price: number }> };

/** Which entry of the dataset a model id is, as `calcPrice(usage, id)` finds it (null: none). */
export type Finder = (modelKey: string) => Found | null;

const ZERO = { input_tokens: 0, output_tokens: 0 };

/** Where the build writes the dataset as JSON: dist/, beside tsc's output and the CLI bundle. */
const COMPACT = new URL('../genai-prices.json', import.meta.url);

let finder: Finder | null = null;
function load(): Finder {
  finder ??= compactFinder() ?? libraryFinder();
  return finder;
}

/** The build's JSON of the dataset, when there is one of the pinned version. */
function compactFinder(): Finder | undefined {
  let data: CompactDataset;
  try {
    data = JSON.parse(readFileSync(COMPACT, 'utf8')) as CompactDataset;
  } catch {
    return undefined;
  }
  if (data?.name !== DATASET.name || data.version !== DATASET.version || !isCompactShape(data.providers))
    return undefined;
  return (modelKey) => findModel(data.providers, modelKey);
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object';

/**
 * Every provider and model has the fields the pricer reads, of their kinds: a damaged or edited
 * file of the right version is not read half-way (the library answers instead).
 */
function isCompactShape(providers: unknown): providers is CompactDataset['providers'] {
  return (
    Array.isArray(providers) &&
    providers.every(
      (p) =>
        isObject(p) &&
        typeof p.id === 'string' &&
        (p.model_match === undefined || isObject(p.model_match)) &&
        (p.fallback_model_providers === undefined || Array.isArray(p.fallback_model_providers)) &&
        Array.isArray(p.models) &&
        p.models.every(
          (m: unknown) =>
            isObject(m) &&
            typeof m.id === 'string' &&
            isObject(m.match) &&
            (Array.isArray(m.prices)
              ? m.prices.every((dated: unknown) => isObject(dated) && isObject(dated.prices))
              : isObject(m.prices)),
        ),
    )
  );
}

/** The library itself, asked with an empty usage at the current time. */
export function libraryFinder(): Finder {
  const lib = createRequire(import.meta.url)('@pydantic/genai-prices') as Lib;
  return (modelKey) => lib.calcPrice(ZERO, modelKey, { timestamp: new Date() });
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

/** A model as the dataset has it: one price whatever the time, or prices that change with it. */
type Entry = { fixed: Rate } | { key: string; info: ModelEntry };

/** The catalogue: which entry a model id is (cached; null when the dataset does not know it). */
export class GenaiCatalog {
  /** `find`: how the dataset is loaded and asked (default: the build's JSON, else the library). */
  constructor(private readonly find: () => Finder = load) {}

  private readonly entries = new Map<string, Entry | null>();
  private readonly rates = new Map<ModelPriceEntry, Rate>();

  /** Load the dataset now (a process about to price rows loads it while it has nothing else to do). */
  warm(): void {
    this.find();
  }

  /** The rate of `modelKey` at `at` (ISO 8601), parsed only for a model whose prices change. */
  lookup(modelKey: string, at: string | undefined): Rate | undefined {
    const entry = this.entry(modelKey);
    if (!entry) return undefined;
    if ('fixed' in entry) return entry.fixed;
    const when = at === undefined ? new Date() : new Date(at);
    const prices = pricesAt(entry.info, Number.isNaN(when.getTime()) ? new Date() : when);
    let rate = this.rates.get(prices);
    if (!rate) {
      rate = rateOf(entry.key, prices);
      this.rates.set(prices, rate);
    }
    return rate;
  }

  private entry(modelKey: string): Entry | null {
    let entry = this.entries.get(modelKey);
    if (entry !== undefined) return entry;
    const result = modelKey === '' ? null : resolve(this.find(), modelKey);
    entry = null;
    if (result && hasTokenPrices(result.model)) {
      const key = `genai-prices@${DATASET.version}:${result.provider.id}/${result.model.id}`;
      const { prices } = result.model;
      entry = Array.isArray(prices) ? { key, info: result.model } : { fixed: rateOf(key, prices) };
    }
    // A transcript may name many models; the map stays small whatever it holds.
    if (this.entries.size >= 10_000) this.entries.clear();
    this.entries.set(modelKey, entry);
    return entry;
  }
}

/**
 * The dataset's entry for a model id; null when it has none (or cannot say) — and when the id
 * matched it only by a prefix that ends inside a version number: the dataset matches many models by
 * `starts_with`, so `claude-opus-4-10` would be priced as `claude-opus-4-1` and `claude-sonnet-5-1`
 * as `claude-sonnet-5`, another model at another price. Such an id is unknown (named as such).
 */
function resolve(find: Finder, modelKey: string): Found | null {
  let found: Found | null;
  try {
    found = find(modelKey);
  } catch {
    return null;
  }
  if (!found) return null;
  // The library also tries the id with an 8-digit date written as YYYY-MM-DD.
  const ids = [modelKey, modelKey.replace(/-(20\d{2})(\d{2})(\d{2})(?=-|:|$)/g, '-$1-$2-$3')];
  return ids.some((id) => matchesWhole(found.model.match, id)) ? found : null;
}

/**
 * Whether `id` matches as the library's matcher does (case-insensitive), with one rule more: a
 * `starts_with` prefix must not stop inside a version number — `claude-opus-4-1` does not match
 * `claude-opus-4-10` (it stops mid-number) nor `claude-sonnet-5` `claude-sonnet-5-1` (a further
 * version part, `-1`/`.1`, one or two digits). A date snapshot after it (`-0613`, `-2024-08-06`) or a
 * name (`-latest`, `-mini`) is not part of the version.
 */
export function matchesWhole(logic: MatchLogic, id: string): boolean {
  const key = id.toLowerCase();
  if ('or' in logic) return logic.or.some((l) => matchesWhole(l, key));
  if ('and' in logic) return logic.and.every((l) => matchesWhole(l, key));
  if ('equals' in logic) return key === logic.equals.toLowerCase();
  if ('starts_with' in logic) {
    const prefix = logic.starts_with.toLowerCase();
    return key.startsWith(prefix) && !continuesVersion(prefix, key.slice(prefix.length));
  }
  if ('ends_with' in logic) return key.endsWith(logic.ends_with.toLowerCase());
  if ('contains' in logic) return key.includes(logic.contains.toLowerCase());
  if ('regex' in logic) return new RegExp(logic.regex).test(key);
  return false;
}

/** After a prefix that ends in a digit: more digits, or a separator and a one- or two-digit number. */
function continuesVersion(prefix: string, rest: string): boolean {
  if (!/\d$/.test(prefix)) return false;
  return /^\d/.test(rest) || /^[-.]\d{1,2}(?!\d)/.test(rest);
}

/** An entry without token prices (speech, OCR, per-request only) cannot price tokens: unknown, not $0. */
function hasTokenPrices(info: ModelEntry): boolean {
  const all = Array.isArray(info.prices) ? info.prices.map((p) => p.prices) : [info.prices];
  return all.every((p) => p.input_mtok !== undefined || p.output_mtok !== undefined);
}

/** The entry's prices in force at `at` (the library's rule: the last constraint that holds wins). */
export function pricesAt(info: ModelEntry, at: Date): ModelPriceEntry {
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
  const now =
    at.getUTCHours() * 3600 + at.getUTCMinutes() * 60 + at.getUTCSeconds() + at.getUTCMilliseconds() / 1000;
  const [s, e] = [secondsUtc(start), secondsUtc(end)];
  return e < s ? now >= s || now < e : now >= s && now < e;
}

/** `HH:MM:SS[.fff](Z|±HH:MM)` as seconds after midnight UTC (the dataset's form: `00:30:00Z`). */
export function secondsUtc(time: string): number {
  const m = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|([+-])(\d{2}):(\d{2}))$/.exec(time);
  if (!m) throw new Error(`a time-of-day price constraint that cannot be read: ${time}`);
  const local = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]) + Number(`0.${m[4] ?? ''}`);
  const offset = m[5] === 'Z' ? 0 : (m[6] === '+' ? 1 : -1) * (Number(m[7]) * 60 + Number(m[8])) * 60;
  return (local - offset + 86_400) % 86_400;
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
 * Cache writes are priced at the 5-minute rate (`cache_write_mtok`), but those the source says were
 * written for an hour (`cacheCreation1hTokens`, a part of them) at `cache_write_1h_mtok` — or, for
 * a model without that price, as the other cache writes: the library's rule too.
 */
export function rateOf(key: string, prices: ModelPriceEntry): Rate {
  const get = (name: string) => prices[name] as number | Tiered | undefined;
  const rates = (usage: Usage, perRequest = true) => {
    const input = perRequest ? usage.inputTokens + usage.cacheReadTokens + usage.cacheCreationTokens : 0;
    const inPrice = perToken(get('input_mtok'), input) ?? 0;
    const cacheWrite = perToken(get('cache_write_mtok'), input) ?? inPrice;
    return {
      input: inPrice,
      output: perToken(get('output_mtok'), input) ?? 0,
      cacheRead: perToken(get('cache_read_mtok'), input) ?? inPrice,
      cacheWrite,
      cacheWrite1h: perToken(get('cache_write_1h_mtok'), input) ?? cacheWrite,
    };
  };
  return {
    key,
    cost(usage, perRequest) {
      const r = rates(usage, perRequest);
      const oneHour = Math.min(usage.cacheCreation1hTokens ?? 0, usage.cacheCreationTokens);
      return (
        usage.inputTokens * r.input +
        (usage.outputTokens + usage.reasoningTokens) * r.output +
        usage.cacheReadTokens * r.cacheRead +
        (usage.cacheCreationTokens - oneHour) * r.cacheWrite +
        oneHour * r.cacheWrite1h
      );
    },
    outputUnit: (usage, perRequest) => rates(usage, perRequest).output,
  };
}
