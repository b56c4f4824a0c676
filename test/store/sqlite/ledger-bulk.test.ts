/**
 * The bulk window of a transcript import into an empty ledger (store/sqlite/ledger-bulk.ts): rows
 * written without the unique key's and `at`'s indexes, both built again when it closes. What it
 * stores must be what the row-by-row path stores; it holds the write lock until it closes (no
 * commit on the way); a correction or a removal closes it first; a repeated key fails the import
 * and leaves the ledger as it was, indexes included; a ledger with rows gets no window.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { LedgerEntry, Pricer } from '../../../src/core/ports/ledger.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';

let dir: string;
const dbs: Db[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-ledger-bulk-'));
});

afterEach(() => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(name: string): { db: Db; store: SqliteLedgerStore; path: string } {
  const path = join(dir, `${name}.db`);
  const db = openDb(path);
  dbs.push(db);
  return { db, store: new SqliteLedgerStore(db, { now: () => new Date('2026-03-09T00:00:00.000Z') }), path };
}

const entry = (i: number, over: Partial<LedgerEntry> = {}): LedgerEntry => ({
  meter: 'transcript',
  sourceId: `msg_${(i * 7919) % 10007}`,
  at: new Date(Date.UTC(2026, 2, 1, i % 72, i % 60)).toISOString(),
  sessionId: i % 5 === 0 ? 's1' : null,
  workItem: i % 5 === 0 ? 'github:o/r#1' : null,
  turnId: null,
  engine: 'claude',
  runner: null,
  model: ['claude-sonnet-4-5', 'claude-opus-4-8', 'unknown-model', 'modèle'][i % 4] as string,
  usage: {
    inputTokens: i * 3,
    outputTokens: i * 5,
    cacheReadTokens: i * 7,
    cacheCreationTokens: i * 11,
    reasoningTokens: 0,
    ...(i % 6 === 0 ? { cacheCreation1hTokens: i } : {}),
  },
  payer: { kind: 'unknown', id: null },
  ...over,
});

const pricer: Pricer = (e) =>
  e.model === 'unknown-model'
    ? { costUsd: null, basis: null, priceKey: null, outputUnit: null }
    : {
        costUsd: e.usage.inputTokens * 3e-6 + e.usage.outputTokens * 1.5e-5,
        basis: 'list-price',
        priceKey: `anthropic/${e.model}`,
        outputUnit: 1.5e-5,
      };

const ROWS = 'SELECT * FROM usage_ledger ORDER BY meter, source_id';
const ROWS_NO_ID = `SELECT meter, source_id, at, session_id, work_item, turn_id, engine, runner, model, input_tokens,
  output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, cache_creation_1h_tokens, cost_usd,
  cost_basis, price_key, payer_kind, payer_id, recorded_at, partial FROM usage_ledger ORDER BY meter, source_id`;
const HOURS = 'SELECT * FROM usage_hours ORDER BY hour, engine, model, payer, basis, turn_id';
const INDEXES =
  "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'usage_ledger' ORDER BY name";
const rows = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => entry(from + k));

it('stores what the row-by-row path stores, the rollup too; the indexes are back; a correction closes it', async () => {
  // Written in the same pieces (the rollup's dollars carry their rounding by write).
  const oneByOne = open('add');
  await oneByOne.store.add(rows(0, 700), pricer);
  await oneByOne.store.add(rows(700, 1500), pricer);
  const copies = [entry(3, { usage: { ...entry(3).usage, outputTokens: 999_999 } })];
  await oneByOne.store.add(copies, pricer);

  const bulk = open('bulk');
  const run = await bulk.store.beginImport({ commitEveryMs: 0, bulk: true });
  expect(await run.write({ add: rows(0, 700), correct: [], remove: [] }, pricer)).toEqual({
    added: 700,
    removedOwn: 0,
  });
  // The window is open: the key's and at's indexes are gone on this connection, nothing is committed.
  expect(bulk.db.prepare(INDEXES).all()).toHaveLength(4);
  await run.commit(true);
  const reader = new Database(bulk.path, { readonly: true });
  try {
    expect(reader.prepare('SELECT COUNT(*) FROM usage_ledger').pluck().get()).toBe(0);
    expect(reader.prepare(INDEXES).all()).toEqual(oneByOne.db.prepare(INDEXES).all());
  } finally {
    reader.close();
  }
  await run.write({ add: rows(700, 1500), correct: copies, remove: [] }, pricer);
  // The correction closed the window: its indexes are back before the row was looked up.
  expect(bulk.db.prepare(INDEXES).all()).toEqual(oneByOne.db.prepare(INDEXES).all());
  await run.finish();

  expect(bulk.db.prepare(ROWS_NO_ID).all()).toEqual(oneByOne.db.prepare(ROWS_NO_ID).all());
  expect(bulk.db.prepare(HOURS).all()).toEqual(oneByOne.db.prepare(HOURS).all());
  expect(bulk.db.prepare('PRAGMA integrity_check').pluck().all()).toEqual(['ok']);
  // Scanned again: nothing new.
  expect(await bulk.store.add(rows(0, 1500), pricer)).toBe(0);
});

it('a repeated key fails the import and leaves the ledger as it was, its indexes too', async () => {
  const { db, store } = open('repeat');
  const indexes = db.prepare(INDEXES).all();
  const run = await store.beginImport({ commitEveryMs: 0, bulk: true });
  await run.write({ add: rows(0, 50), correct: [], remove: [] }, pricer);
  await run.write({ add: [entry(10)], correct: [], remove: [] }, pricer);
  await expect(run.finish()).rejects.toThrow(/UNIQUE/);
  expect(db.prepare(INDEXES).all()).toEqual(indexes);
  expect(db.prepare('SELECT COUNT(*) FROM usage_ledger').pluck().get()).toBe(0);
  expect(db.prepare('SELECT COUNT(*) FROM usage_hours').pluck().get()).toBe(0);
});

it('an aborted window leaves the ledger and its indexes as they were; a removal closes the window', async () => {
  const { db, store } = open('abort');
  const indexes = db.prepare(INDEXES).all();
  const run = await store.beginImport({ commitEveryMs: 0, bulk: true });
  await run.write({ add: rows(0, 100), correct: [], remove: [] }, pricer);
  await run.abort();
  expect(db.prepare(INDEXES).all()).toEqual(indexes);
  expect(db.prepare('SELECT COUNT(*) FROM usage_ledger').pluck().get()).toBe(0);

  const again = await store.beginImport({ commitEveryMs: 0, bulk: true });
  await again.write({ add: rows(0, 100), correct: [], remove: [entry(4).sourceId] }, pricer);
  expect(db.prepare(INDEXES).all()).toEqual(indexes);
  await again.finish();
  expect(db.prepare('SELECT COUNT(*) FROM usage_ledger').pluck().get()).toBe(99);
});

it('a ledger with rows gets no window: a key it holds is skipped as always', async () => {
  const { db, store } = open('rows');
  await store.add([entry(1)], pricer);
  const before = db.prepare(ROWS).all();
  const run = await store.beginImport({ commitEveryMs: 0, bulk: true });
  expect(await run.write({ add: [entry(1), entry(2)], correct: [], remove: [] }, pricer)).toEqual({
    added: 1,
    removedOwn: 0,
  });
  expect(db.prepare(INDEXES).all()).toHaveLength(6);
  await run.finish();
  expect(
    db
      .prepare(ROWS)
      .all()
      .filter((r) => (r as { source_id: string }).source_id === entry(1).sourceId),
  ).toEqual(before);
  expect(db.prepare('SELECT COUNT(*) FROM usage_ledger').pluck().get()).toBe(2);
});
