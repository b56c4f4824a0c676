/**
 * The ledger's import path (`usage scan`, the daemon's watcher): its rows are written through
 * statements of their own — the columns they share as SQL literals, SQLite's CHECK constraints off
 * and checked by the writer instead. What it stores must be what the row-by-row path (`add`) stores,
 * to the last bit of every column and of the hourly rollup, and what it refuses must be refused.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LedgerEntry, Pricer } from '../../../src/core/ports/ledger.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';

let dir: string;
const dbs: Db[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-ledger-import-'));
});

afterEach(() => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(name: string): { db: Db; store: SqliteLedgerStore } {
  const db = openDb(join(dir, `${name}.db`));
  dbs.push(db);
  // One recorded time for both paths: the rows are compared column by column.
  return { db, store: new SqliteLedgerStore(db, { now: () => new Date('2026-03-09T00:00:00.000Z') }) };
}

/** A small deterministic generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const START = Date.parse('2026-03-01T00:00:00.000Z');

/**
 * Rows of every shape the shared columns take: own sessions with work items and turns, payers with
 * and without ids, models unknown (no price, no basis), names a literal must quote (`'`) or cannot
 * be (non-ASCII, a NUL: those rows are bound instead), partial rows, 1-hour cache writes.
 */
function entries(rand: () => number, n: number, prefix: string): LedgerEntry[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  return Array.from({ length: n }, (_, i) => {
    const cacheCreationTokens = Math.floor(rand() * 2000);
    return {
      meter: pick(['transcript', 'transcript', 'transcript', 'stream-json'] as const),
      sourceId: `${prefix}-${i}${rand() < 0.05 ? "-it's" : ''}`,
      at: new Date(START + Math.floor(rand() * 3 * 86_400_000)).toISOString(),
      sessionId: pick([null, null, 's1', "s'2"]),
      workItem: pick([null, 'github:o/r#1']),
      turnId: pick([null, null, null, 1, 2]),
      engine: pick(['claude', 'claude', null, 'codex']),
      runner: pick([null, 'tmux']),
      model: pick([
        'claude-sonnet-4-5',
        'claude-sonnet-4-5',
        'claude-opus-4-8',
        'unknown-model',
        "o'model",
        'modèle',
        'nul\u0000model',
        '',
      ]),
      usage: {
        inputTokens: Math.floor(rand() * 5000),
        outputTokens: Math.floor(rand() * 900),
        cacheReadTokens: Math.floor(rand() * 40_000),
        cacheCreationTokens,
        reasoningTokens: Math.floor(rand() * 100),
        ...(rand() < 0.3 ? { cacheCreation1hTokens: Math.floor(cacheCreationTokens / 2) } : {}),
      },
      payer: pick([
        { kind: 'subscription', id: null },
        { kind: 'api-key', id: 'key:aaaaaaaaaaaa' },
        { kind: 'unknown', id: null },
      ] as const),
      partial: rand() < 0.05,
    };
  });
}

/** Dollars with all their bits; a model of neither price is unknown (no cost, no basis, no key). */
const pricer: Pricer = (e) => {
  if (e.model === 'unknown-model' || e.model === '')
    return { costUsd: null, basis: null, priceKey: null, outputUnit: null };
  const unit = e.model === 'claude-opus-4-8' ? 2.5e-5 : 1.5e-5;
  return {
    costUsd: e.usage.inputTokens * 3e-6 + e.usage.outputTokens * unit + e.usage.cacheReadTokens * 3.1e-7,
    basis: 'list-price',
    priceKey: `anthropic/${e.model}`,
    outputUnit: unit,
  };
};

const ROWS = `SELECT meter, source_id, at, session_id, work_item, turn_id, engine, runner, model, input_tokens,
  output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, cache_creation_1h_tokens,
  cost_usd, cost_basis, price_key, payer_kind, payer_id, recorded_at, partial,
  typeof(turn_id) AS turn_type, typeof(partial) AS partial_type, typeof(cost_usd) AS cost_type
  FROM usage_ledger ORDER BY meter, source_id`;
const HOURS = 'SELECT * FROM usage_hours ORDER BY hour, engine, model, payer, basis, turn_id';

describe('ledger import', () => {
  it('stores what adding the rows one write at a time stores, to the last bit, the hourly rollup too', async () => {
    const rand = random(21);
    const rows = entries(rand, 3000, 'r');
    // Later copies with larger output counts (corrections), some of rows of an earlier piece.
    const copies = rows
      .filter(() => rand() < 0.1)
      .map((e) => ({ ...e, usage: { ...e.usage, outputTokens: e.usage.outputTokens + 31 } }));
    const oneByOne = open('add');
    for (let i = 0; i < rows.length; i += 250) await oneByOne.store.add(rows.slice(i, i + 250), pricer);
    await oneByOne.store.add(copies, pricer);

    const imported = open('import');
    const run = await imported.store.beginImport({ commitEveryMs: 0 });
    for (let i = 0; i < rows.length; i += 1000) {
      const added = await run.write({ add: rows.slice(i, i + 1000), correct: [], remove: [] }, pricer);
      expect(added).toEqual({ added: Math.min(1000, rows.length - i), removedOwn: 0 });
      await run.commit(i === 1000);
    }
    await run.write({ add: [], correct: copies, remove: [] }, pricer);
    await run.finish();

    const stored = imported.db.prepare(ROWS).all();
    expect(stored).toHaveLength(rows.length);
    expect(stored).toEqual(oneByOne.db.prepare(ROWS).all());
    expect(imported.db.prepare(HOURS).all()).toEqual(oneByOne.db.prepare(HOURS).all());
    expect(imported.db.prepare('SELECT COUNT(*) AS n FROM usage_hours_dirty').get()).toEqual({ n: 0 });
  });

  it('refuses a row the ledger does not allow (payer kind, cost basis), then leaves the checks on', async () => {
    const { db, store } = open('refuse');
    const [row] = entries(random(5), 1, 'x') as [LedgerEntry];
    const bogusPayer = { ...row, sourceId: 'bogus-payer', payer: { kind: 'bogus' as 'unknown', id: null } };
    const run = await store.beginImport({ commitEveryMs: 60_000 });
    await expect(run.write({ add: [bogusPayer], correct: [], remove: [] }, pricer)).rejects.toThrow(
      /payer kind bogus/,
    );
    const bogusBasis: Pricer = (e) => ({ ...pricer(e), basis: 'guessed' as 'list-price' });
    const again = await store.beginImport({ commitEveryMs: 60_000 });
    await expect(
      again.write({ add: [{ ...row, sourceId: 'bogus-basis' }], correct: [], remove: [] }, bogusBasis),
    ).rejects.toThrow(/cost basis guessed/);
    await again.finish();
    expect(db.prepare('SELECT COUNT(*) AS n FROM usage_ledger').get()).toEqual({ n: 0 });
    // The connection's own checks are back once an import ends.
    expect(db.pragma('ignore_check_constraints', { simple: true })).toBe(0);
    await expect(store.add([bogusPayer], pricer)).rejects.toThrow(/CHECK constraint/);
  });

  it('an import aborted midway leaves the ledger and its rollup as they were', async () => {
    const rand = random(9);
    const { db, store } = open('abort');
    await store.add(entries(rand, 400, 'before'), pricer);
    const rowsBefore = db.prepare(ROWS).all();
    const hoursBefore = db.prepare(HOURS).all();
    const run = await store.beginImport({ commitEveryMs: 60_000 });
    await run.write(
      { add: entries(rand, 800, 'during'), correct: [], remove: ['before-1', 'before-2'] },
      pricer,
    );
    await run.abort();
    expect(db.prepare(ROWS).all()).toEqual(rowsBefore);
    expect(db.prepare(HOURS).all()).toEqual(hoursBefore);
    expect(db.pragma('ignore_check_constraints', { simple: true })).toBe(0);
  });
});
