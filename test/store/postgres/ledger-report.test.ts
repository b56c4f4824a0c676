/**
 * The PostgreSQL ledger against SQLite's, for the same random rows: what it stores (every column,
 * and the rows' order), and what it reports — every grouping over windows of whole and cut hours
 * (SQLite answers those from its hourly rollup, PostgreSQL from the rows), the dollars to the last
 * bit, the keys in the same order, the unmetered drives' groups (ties of their latest drive too) —
 * and sessions' costs, turns' totals and repricing. The rows have no NUL (PostgreSQL's text holds
 * none; the PostgreSQL ledger writes it as U+FFFD).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GROUP_BY, type LedgerEntry, type LedgerStore, type Pricer } from '../../../src/core/ports/ledger.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { PgLedgerStore } from '../../../src/store/postgres/ledger.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';
import { freshDatabase } from '../../helpers/postgres.js';

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
const DAY = 86_400_000;

function entries(rand: () => number, n: number, prefix: string): LedgerEntry[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  return Array.from({ length: n }, (_, i) => ({
    meter: pick(['transcript', 'transcript', 'wire', 'stream-json'] as const),
    sourceId: `${prefix}-${i}${rand() < 0.05 ? "-it's" : ''}`,
    at: new Date(START + Math.floor(rand() * 3 * DAY)).toISOString(),
    sessionId: pick([null, 's1', "s'2", 'S3', 'sé4']),
    workItem: pick([null, 'github:o/r#1', 'github:o/r#10', 'github:o/r#2']),
    turnId: pick([null, null, 1, 2, 3, 4]),
    engine: pick(['claude', 'claude', null, 'codex', 'Zed']),
    runner: pick([null, 'tmux']),
    model: pick([
      'claude-sonnet-4-5',
      'claude-opus-4-8',
      'engine-said',
      'unknown-model',
      "o'model",
      'modèle',
      '',
    ]),
    usage: {
      inputTokens: Math.floor(rand() * 5000),
      outputTokens: Math.floor(rand() * 900),
      cacheReadTokens: Math.floor(rand() * 40_000),
      cacheCreationTokens: Math.floor(rand() * 2000),
      reasoningTokens: Math.floor(rand() * 100),
      ...(rand() < 0.3 ? { cacheCreation1hTokens: Math.floor(rand() * 500) } : {}),
    },
    payer: pick([
      { kind: 'subscription', id: null },
      { kind: 'api-key', id: 'key:aaaaaaaaaaaa' },
      { kind: 'api-key', id: 'key:bbbbbbbbbbbb' },
      { kind: 'unknown', id: null },
    ] as const),
    partial: rand() < 0.05,
  }));
}

/** Dollars with all their bits; `engine-said` the engine's figure; unknown models unpriced (until `knowing`). */
const pricing =
  (knowing: readonly string[] = []): Pricer =>
  (e) => {
    if (e.model === 'engine-said')
      return {
        costUsd: e.usage.outputTokens / 7919,
        basis: 'engine-reported',
        priceKey: null,
        outputUnit: null,
      };
    if ((e.model === 'unknown-model' || e.model === '') && !knowing.includes(e.model ?? ''))
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
  cost_usd, cost_basis, price_key, payer_kind, payer_id, recorded_at, partial FROM usage_ledger`;

let dir: string;
let db: Db;
let pg: Pg;
let drop: () => Promise<void>;
let sqlite: LedgerStore;
let postgres: LedgerStore;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-pg-ledger-'));
  db = openDb(join(dir, 'registry.sqlite'));
  const database = await freshDatabase();
  drop = database.drop;
  pg = await openPg(database.url, { max: 4 });
  const now = () => new Date('2026-03-09T00:00:00.000Z');
  sqlite = new SqliteLedgerStore(db, { now });
  postgres = new PgLedgerStore(pg, { now });
});

afterEach(async () => {
  db.close();
  await pg.close();
  await drop();
  rmSync(dir, { recursive: true, force: true });
});

/** The same calls on both stores, their answers compared. */
async function both<T>(call: (ledger: LedgerStore) => Promise<T>): Promise<T> {
  const expected = await call(sqlite);
  expect(await call(postgres)).toEqual(expected);
  return expected;
}

async function storedAlike(): Promise<void> {
  const pgRows = await pg.rows(`${ROWS} ORDER BY meter COLLATE "C", source_id COLLATE "C"`);
  expect(pgRows).toEqual(db.prepare(`${ROWS} ORDER BY meter, source_id`).all());
  // Numbered in the order they came (ids themselves differ: PostgreSQL's sequence skips on conflicts).
  const order = 'SELECT meter, source_id FROM usage_ledger ORDER BY id';
  expect(await pg.rows(order)).toEqual(db.prepare(order).all());
}

const WINDOWS: Array<[string, string]> = [
  ['2000-01-01T00:00:00.000Z', '2100-01-01T00:00:00.000Z'],
  ['2026-03-01T01:30:00.000Z', '2026-03-03T07:00:00.000Z'],
  ['2026-03-01T05:17:43.210Z', '2026-03-02T22:41:09.876Z'],
  ['2026-03-02T00:00:00.000Z', '2026-03-02T01:00:00.000Z'],
  ['2026-03-02T03:00:00.001Z', '2026-03-02T03:59:59.999Z'],
];

async function reportsAlike(): Promise<void> {
  for (const [since, until] of WINDOWS)
    for (const by of GROUP_BY)
      await both((ledger) => ledger.report({ since: new Date(since), until: new Date(until), by }));
  await both((ledger) => ledger.sessionCosts(['s1', "s'2", 'S3', 'sé4', 'none']));
  for (const turn of [1, 2, 3, 4, 5]) await both((ledger) => ledger.turnTotals(turn));
}

describe('PostgreSQL ledger against SQLite', () => {
  it('stores and reports what SQLite does for the same rows, corrections and drives', async () => {
    const rand = random(17);
    const rows = entries(rand, 2500, 'r');
    const copies = rows
      .filter(() => rand() < 0.15)
      .map((e) => ({
        ...e,
        turnId: e.turnId ?? (rand() < 0.5 ? 5 : null),
        usage: { ...e.usage, outputTokens: e.usage.outputTokens + Math.floor(rand() * 40) - 10 },
      }));
    for (let i = 0; i < rows.length; i += 400) await both((l) => l.add(rows.slice(i, i + 400), pricing()));
    // Copies, some twice in one write, and with a settle of turns' waiting drives.
    for (const turnId of [1, 2, 5, 6]) {
      const d = { ...drive(rand), turnId, reason: 'waiting' };
      await both((l) => l.recordUnmetered(d));
    }
    await both((l) => l.add([...copies, ...copies.slice(0, 50)], pricing(), 'waiting'));
    for (let i = 0; i < 80; i++) {
      const d = { ...drive(rand), turnId: 100 + i };
      await both((l) => l.recordUnmetered(d));
    }
    await storedAlike();
    await reportsAlike();
    expect(await both((l) => l.repriceUnknown(pricing(['unknown-model'])))).toBeGreaterThan(0);
    await storedAlike();
    await reportsAlike();
  });

  it('an import stores what SQLite stores: its pieces, corrections and removals', async () => {
    const rand = random(29);
    const rows = entries(rand, 3000, 'i');
    const copies = rows
      .filter(() => rand() < 0.1)
      .map((e) => ({ ...e, usage: { ...e.usage, outputTokens: e.usage.outputTokens + 31 } }));
    const removed = rows.filter(() => rand() < 0.05).map((e) => e.sourceId);
    await both(async (ledger) => {
      const run = await ledger.beginImport({ commitEveryMs: 0 });
      const results = [];
      for (let i = 0; i < rows.length; i += 1000) {
        results.push(await run.write({ add: rows.slice(i, i + 1000), correct: [], remove: [] }, pricing()));
        await run.commit(false);
      }
      results.push(await run.write({ add: [], correct: copies, remove: removed }, pricing()));
      await run.finish();
      return results;
    });
    await storedAlike();
    await reportsAlike();
  });
});

/** An unmetered drive of few engines, runners, reasons and instants (groups whose latest drives tie). */
function drive(rand: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  return {
    at: pick(['2026-03-01T10:00:00.000Z', '2026-03-02T10:00:00.000Z', '2026-03-02T11:30:00.000Z']),
    sessionId: null,
    workItem: null,
    turnId: 0,
    engine: pick([null, 'ollama', 'claude', 'Codex']),
    runner: pick([null, 'tmux', 'process']),
    reason: pick(['engine has no meter', 'no result event', 'lost']),
  };
}
