/**
 * Writes dist/genai-prices.json: the pinned `@pydantic/genai-prices` dataset as the pricer reads it
 * (src/ledger/genai-prices-data.ts), so a process that prices parses a small JSON file instead of
 * requiring the library (~70 ms of CPU). Called by scripts/build-cli.ts.
 *
 * The file is written only if it prices exactly as the library does (`checkDataset`): for every
 * model id of the dataset and variants of it, the finder answers the provider and entry the
 * library's `calcPrice` does; and `calcPrice` prices every entry at each of its dated prices without
 * throwing (so an entry the finder answers is never one the library would have refused).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as GenaiPrices from '@pydantic/genai-prices';
import { DATASET } from '../src/ledger/genai-prices.js';
import { type CompactDataset, compactProviders, findModel } from '../src/ledger/genai-prices-data.js';

type Lib = typeof GenaiPrices;
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const PRICE_DATA = join(ROOT, 'dist', 'genai-prices.json');
const ZERO = { input_tokens: 0, output_tokens: 0 };

/** Ids a person or an engine may name a dataset model by: its id, its match strings, dated, cased. */
function candidateIds(providers: readonly GenaiPrices.Provider[]): Set<string> {
  const ids = new Set<string>(['', 'claude-imaginary-9-9', 'gpt-imaginary', 'unknown-model']);
  const strings = (logic: GenaiPrices.MatchLogic): string[] => {
    if ('or' in logic) return logic.or.flatMap(strings);
    if ('and' in logic) return logic.and.flatMap(strings);
    if ('regex' in logic) return [];
    return [Object.values(logic)[0] as string];
  };
  // Ids that more than one provider's model_match takes (the first provider wins), and ids a
  // provider with fallbacks takes that only a fallback's model matches.
  const matchStrings = providers.flatMap((p) => (p.model_match ? strings(p.model_match) : []));
  for (const a of matchStrings) for (const b of matchStrings) ids.add(`${a}-${b}`);
  for (const p of providers) {
    const own = p.model_match ? strings(p.model_match) : [];
    for (const fallback of providers.filter((f) => p.fallback_model_providers?.includes(f.id)))
      for (const m of fallback.models) for (const prefix of own) ids.add(`${prefix}-${m.id}`);
  }
  for (const p of providers) {
    for (const m of p.models) {
      for (const id of [m.id, ...strings(m.match)]) {
        ids.add(id);
        ids.add(id.toUpperCase());
        ids.add(` ${id} `);
        ids.add(`${id}-20250929`);
        ids.add(`${id}-2025-09-29`);
        ids.add(`${id}-20251399`);
        ids.add(`${id}-latest`);
        ids.add(`${id}-1`);
        ids.add(`${p.id}/${id}`);
      }
    }
  }
  return ids;
}

/** Every moment at which some entry's price changes, and one inside each time-of-day window. */
function moments(providers: readonly GenaiPrices.Provider[]): Date[] {
  const at = new Set<string>([new Date().toISOString()]);
  for (const p of providers)
    for (const m of p.models)
      if (Array.isArray(m.prices))
        for (const { constraint: c } of m.prices) {
          if (c?.type === 'start_date') at.add(`${c.start_date}T00:00:00.000Z`);
          if (c?.type === 'time_of_date')
            for (const hour of ['00', '02', '07', '12', '20']) at.add(`2026-01-01T${hour}:15:00.000Z`);
        }
  return [...at].map((iso) => new Date(iso));
}

/** Throws unless the compact dataset prices exactly as the library does (see the file's comment). */
export function checkDataset(
  lib: Lib,
  providers: readonly GenaiPrices.Provider[],
  data: CompactDataset,
): void {
  for (const id of candidateIds(providers)) {
    let theirs: ReturnType<Lib['calcPrice']>;
    try {
      theirs = lib.calcPrice(ZERO, id, { timestamp: new Date() });
    } catch {
      theirs = null;
    }
    const ours = findModel(data.providers, id);
    const same =
      theirs === null
        ? ours === null
        : ours !== null &&
          ours.provider.id === theirs.provider.id &&
          JSON.stringify(ours.model) ===
            JSON.stringify({ id: theirs.model.id, match: theirs.model.match, prices: theirs.model.prices });
    if (!same)
      throw new Error(
        `the compact price data finds ${JSON.stringify(id)} as ${ours ? `${ours.provider.id}/${ours.model.id}` : 'nothing'}, the library as ${theirs ? `${theirs.provider.id}/${theirs.model.id}` : 'nothing'}`,
      );
  }
  // Each entry alone in its provider, under an id only it matches: calcPrice computes its price.
  const times = moments(providers);
  for (const provider of providers)
    for (const model of provider.models) {
      const alone = { ...provider, models: [{ ...model, match: { equals: 'the-loop-check' } }] };
      for (const timestamp of times)
        if (!lib.calcPrice(ZERO, 'the-loop-check', { provider: alone, timestamp }))
          throw new Error(
            `the library does not price ${provider.id}/${model.id} at ${timestamp.toISOString()}`,
          );
    }
}

/** Builds, checks and writes dist/genai-prices.json from the installed (pinned) library. */
export async function writePriceData(): Promise<void> {
  const lib = createRequire(import.meta.url)('@pydantic/genai-prices') as Lib;
  const pkg = join(ROOT, 'node_modules', '@pydantic', 'genai-prices', 'package.json');
  const { version } = JSON.parse(readFileSync(pkg, 'utf8')) as { version: string };
  if (version !== DATASET.version)
    throw new Error(
      `@pydantic/genai-prices ${version} is installed; the pricer is pinned to ${DATASET.version}`,
    );
  // Before any update (none is ever asked for), the library's data is the dataset it embeds.
  const providers = await lib.waitForUpdate();
  if (!providers) throw new Error('@pydantic/genai-prices has no provider data');
  const data: CompactDataset = { name: DATASET.name, version, providers: compactProviders(providers) };
  checkDataset(lib, providers, data);
  writeFileSync(PRICE_DATA, JSON.stringify(data));
}
