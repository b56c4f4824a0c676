import type * as GenaiPrices from '@pydantic/genai-prices';

/**
 * The part of `@pydantic/genai-prices`' embedded dataset the pricer reads, written as JSON by the
 * build (scripts/build-cli.ts → dist/genai-prices.json), and the library's own rule for finding a
 * model id in it. Requiring the library costs a process ~70 ms of CPU (compiling its 480 KB of
 * object literals, its unit registry, ICU's collator); parsing this file, a few. A turn loads its
 * prices while its engine starts, on a machine the engine needs too.
 *
 * The data is the library's, untouched (only fields the pricer never reads are left out); the
 * finder is a line-for-line port of what `calcPrice(usage, modelId)` does with an id alone (no
 * provider id, no API URL): the provider whose `model_match` matches, then its first model whose
 * `match` does — else its fallback providers' — then the same with an 8-digit date in the id
 * written YYYY-MM-DD. The build refuses to write the file unless the finder agrees with the
 * library's `calcPrice` on every model id of the dataset (and variants of them), and unless
 * `calcPrice` prices every entry at every one of its dated prices (it never throws, so a model it
 * finds is one it prices); test/ledger/genai-prices-data.test.ts checks the same.
 */

type Provider = GenaiPrices.Provider;
type MatchLogic = GenaiPrices.MatchLogic;

export interface CompactModel {
  id: string;
  match: MatchLogic;
  prices: GenaiPrices.ModelInfo['prices'];
}

export interface CompactProvider {
  id: string;
  model_match?: MatchLogic;
  fallback_model_providers?: string[];
  models: CompactModel[];
}

/** The file's content: which package and version the providers come from. */
export interface CompactDataset {
  name: string;
  version: string;
  providers: CompactProvider[];
}

/** What the finder answers: the provider's id and the model's entry (as `calcPrice` returns them). */
export interface Found {
  provider: { id: string };
  model: CompactModel;
}

/** The library's providers with only what the pricer reads. */
export function compactProviders(providers: readonly Provider[]): CompactProvider[] {
  return providers.map((p) => ({
    id: p.id,
    ...(p.model_match === undefined ? {} : { model_match: p.model_match }),
    ...(p.fallback_model_providers === undefined
      ? {}
      : { fallback_model_providers: p.fallback_model_providers }),
    models: p.models.map((m) => ({ id: m.id, match: m.match, prices: m.prices })),
  }));
}

/** The library's matcher (`f`): case-insensitive but for a regex, tested on the id as given. */
function matches(logic: MatchLogic, id: string): boolean {
  if ('or' in logic) return logic.or.some((l) => matches(l, id));
  if ('and' in logic) return logic.and.every((l) => matches(l, id));
  if ('equals' in logic) return id.toLowerCase() === logic.equals.toLowerCase();
  if ('starts_with' in logic) return id.toLowerCase().startsWith(logic.starts_with.toLowerCase());
  if ('ends_with' in logic) return id.toLowerCase().endsWith(logic.ends_with.toLowerCase());
  if ('contains' in logic) return id.toLowerCase().includes(logic.contains.toLowerCase());
  if ('regex' in logic) return new RegExp(logic.regex).test(id);
  return false;
}

/** The library's `C`: the provider's first matching model, else its fallback providers' (one level). */
function inProvider(
  provider: CompactProvider,
  id: string,
  all?: readonly CompactProvider[],
): CompactModel | undefined {
  const own = provider.models.find((m) => matches(m.match, id));
  if (own) return own;
  if (!provider.fallback_model_providers || !all) return undefined;
  for (const fallbackId of provider.fallback_model_providers) {
    const fallback = all.find((p) => p.id === fallbackId);
    if (!fallback) continue;
    const found = inProvider(fallback, id);
    if (found) return found;
  }
  return undefined;
}

const DATE = /(-)(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?=-|:|$)/g;

/** The library's `ve`: each real 8-digit date `-YYYYMMDD` written `-YYYY-MM-DD`. */
function datesWithDashes(id: string): string {
  return id.replace(DATE, (whole, dash: string, y: string, m: string, d: string) => {
    const date = new Date(Date.UTC(Number(y), Number(m) - 1, Number(d)));
    return date.getUTCFullYear() !== Number(y) ||
      date.getUTCMonth() !== Number(m) - 1 ||
      date.getUTCDate() !== Number(d)
      ? whole
      : `${dash}${y}-${m}-${d}`;
  });
}

/** What `calcPrice(usage, modelId)` finds for `modelId` alone; null when it finds nothing. */
export function findModel(providers: readonly CompactProvider[], modelId: string): Found | null {
  const id = modelId.toLowerCase().trim();
  const provider = providers.find((p) => p.model_match !== undefined && matches(p.model_match, id));
  if (!provider) return null;
  let model = inProvider(provider, id, providers);
  if (!model) {
    const dashed = datesWithDashes(id);
    if (dashed !== id) model = inProvider(provider, dashed, providers);
  }
  return model ? { provider: { id: provider.id }, model } : null;
}
