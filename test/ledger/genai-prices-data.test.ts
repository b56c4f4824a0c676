import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkDataset } from '../../scripts/build-prices.js';
import { DATASET, GenaiCatalog, libraryFinder } from '../../src/ledger/genai-prices.js';
import { type CompactDataset, compactProviders, findModel } from '../../src/ledger/genai-prices-data.js';
import { usage } from '../helpers/usage.js';

// The price dataset as JSON (dist/genai-prices.json, written by scripts/build-prices.ts) prices
// exactly as the library does, and the built code reads it instead of requiring the library.

type Lib = typeof import('@pydantic/genai-prices');
const lib = createRequire(import.meta.url)('@pydantic/genai-prices') as Lib;
const ROOT = join(import.meta.dirname, '../..');

async function compact(): Promise<{
  providers: import('@pydantic/genai-prices').Provider[];
  data: CompactDataset;
}> {
  const providers = (await lib.waitForUpdate()) ?? [];
  return { providers, data: { ...DATASET, providers: compactProviders(providers) } };
}

describe('the compact price dataset', () => {
  it("finds every dataset id (and variants) as the library's calcPrice does; a changed entry is refused", async () => {
    const { providers, data } = await compact();
    expect(data.providers.length).toBe(providers.length);
    expect(() => checkDataset(lib, providers, data)).not.toThrow();
    const changed = structuredClone(data);
    const opus = changed.providers
      .find((p) => p.id === 'anthropic')
      ?.models.find((m) => m.id === 'claude-opus-4-8');
    if (!opus) throw new Error('the dataset has no claude-opus-4-8');
    opus.prices = { input_mtok: 1, output_mtok: 2 };
    expect(() => checkDataset(lib, providers, changed)).toThrow(/claude-opus-4-8/);
  });

  it('a catalogue on it prices as one on the library: same entries, same costs, at any time', async () => {
    const { data } = await compact();
    const ours = new GenaiCatalog(() => (id) => findModel(data.providers, id));
    const theirs = new GenaiCatalog(libraryFinder);
    const ids = [
      'claude-opus-4-8',
      'claude-sonnet-4-5',
      'claude-haiku-4-5',
      'gpt-5.5',
      'gpt-5.1-codex',
      'gemini-3-pro-preview',
      'gemini-2.5-pro',
      'deepseek-chat',
      'whisper-1',
      'claude-opus-4-10',
      'claude-imaginary-9-9',
      ...data.providers.flatMap((p) => p.models.map((m) => m.id)),
    ];
    const u = usage({
      inputTokens: 150_000,
      outputTokens: 4000,
      cacheReadTokens: 60_000,
      cacheCreationTokens: 9000,
    });
    let priced = 0;
    for (const at of ['2024-01-01T03:00:00Z', '2026-11-20T10:00:00Z', '2026-11-20T20:00:00Z'])
      for (const id of ids) {
        const [a, b] = [ours.lookup(id, at), theirs.lookup(id, at)];
        expect(a?.key, id).toBe(b?.key);
        expect(a?.cost(u), id).toBe(b?.cost(u));
        if (a) priced += 1;
      }
    expect(priced).toBeGreaterThan(1000);
  });
});

describe('the built pricer', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  /** Prices claude-opus-4-8 with dist/ledger/genai-prices.js as found in `dist`; says whether it required the library. */
  const priceWith = (dist: string) => {
    const code = `import { createRequire } from 'node:module';
const { GenaiCatalog } = await import(${JSON.stringify(join(dist, 'ledger', 'genai-prices.js'))});
const rate = new GenaiCatalog().lookup('claude-opus-4-8', '2026-11-20T10:00:00Z');
const cache = Object.keys(createRequire(import.meta.url).cache);
console.log(JSON.stringify({ key: rate?.key, cost: rate?.cost({ inputTokens: 1e6, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, reasoningTokens: 0 }), library: cache.some((f) => f.includes('genai-prices')) }));`;
    const ran = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(ran.status, ran.stderr).toBe(0);
    return JSON.parse(ran.stdout) as { key: string; cost: number; library: boolean };
  };

  it('reads dist/genai-prices.json, never the library; without it (or of another version), the library', () => {
    const dist = join(ROOT, 'dist');
    const file = JSON.parse(readFileSync(join(dist, 'genai-prices.json'), 'utf8')) as CompactDataset;
    expect([file.name, file.version]).toEqual([DATASET.name, DATASET.version]);
    const built = priceWith(dist);
    expect(built).toEqual({
      key: `genai-prices@${DATASET.version}:anthropic/claude-opus-4-8`,
      cost: 5,
      library: false,
    });

    // The same modules beside a file of another version, then beside none.
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-prices-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'dist', 'ledger'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    for (const f of ['genai-prices.js', 'genai-prices-data.js'])
      copyFileSync(join(dist, 'ledger', f), join(dir, 'dist', 'ledger', f));
    writeFileSync(join(dir, 'dist', 'genai-prices.json'), JSON.stringify({ ...file, version: '0.0.1' }));
    expect(priceWith(join(dir, 'dist'))).toEqual({ ...built, library: true });
    // The right version, a damaged or edited shape: not read half-way, the library answers.
    const damaged = [
      {
        ...file,
        providers: [
          {
            id: 'anthropic',
            model_match: { starts_with: 'claude' },
            models: [{ id: 'claude', match: { starts_with: 'claude' } }],
          },
        ],
      },
      { ...file, providers: [{ id: 'anthropic', models: 'none' }] },
      {
        ...file,
        providers: [{ id: 'anthropic', models: [{ id: 'x', match: {}, prices: [{ constraint: null }] }] }],
      },
      { ...file, providers: [null] },
    ];
    for (const shape of damaged) {
      writeFileSync(join(dir, 'dist', 'genai-prices.json'), JSON.stringify(shape));
      expect(priceWith(join(dir, 'dist'))).toEqual({ ...built, library: true });
    }
    writeFileSync(join(dir, 'dist', 'genai-prices.json'), '{"name":');
    expect(priceWith(join(dir, 'dist'))).toEqual({ ...built, library: true });
    rmSync(join(dir, 'dist', 'genai-prices.json'));
    expect(priceWith(join(dir, 'dist'))).toEqual({ ...built, library: true });
  });
});
