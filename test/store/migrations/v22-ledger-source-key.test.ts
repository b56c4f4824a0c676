/**
 * Migration 22 on a ledger an older version wrote: the table is made again with its unique key as an
 * index of its own (source id first). Every row keeps every column and its id, the AUTOINCREMENT
 * counter goes on where it was (rows deleted at the end keep their ids unused), the rollup and its
 * triggers work as before, and the key still refuses a second (meter, source id).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { LedgerEntry, Pricer } from '../../../src/core/ports/ledger.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';

let dir: string;
let path: string;
let db: Db;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-migration-22-'));
  path = join(dir, 'the-loop.db');
});

afterEach(() => {
  if (db?.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

const entry = (i: number, over: Partial<LedgerEntry> = {}): LedgerEntry => ({
  meter: i % 3 === 0 ? 'stream-json' : 'transcript',
  sourceId: `msg_${i}`,
  at: new Date(Date.UTC(2026, 2, 1, i % 48, i % 60)).toISOString(),
  sessionId: i % 4 === 0 ? 's1' : null,
  workItem: i % 4 === 0 ? 'github:o/r#1' : null,
  turnId: i % 5 === 0 ? i : null,
  engine: 'claude',
  runner: i % 2 === 0 ? 'tmux' : null,
  model: i % 7 === 0 ? 'unknown-model' : 'claude-sonnet-4-5',
  usage: {
    inputTokens: i * 3,
    outputTokens: i * 5,
    cacheReadTokens: i * 7,
    cacheCreationTokens: i * 11,
    reasoningTokens: i % 2,
    ...(i % 6 === 0 ? { cacheCreation1hTokens: i } : {}),
  },
  payer: i % 2 === 0 ? { kind: 'subscription', id: null } : { kind: 'api-key', id: 'key:abc' },
  partial: i % 9 === 0,
  ...over,
});

const pricer: Pricer = (e) =>
  e.model === 'unknown-model'
    ? { costUsd: null, basis: null, priceKey: null, outputUnit: null }
    : {
        costUsd: e.usage.inputTokens * 3e-6 + e.usage.outputTokens * 1.5e-5,
        basis: 'list-price',
        priceKey: 'anthropic/claude-sonnet-4-5',
        outputUnit: 1.5e-5,
      };

const ALL = (table: string, order: string) => `SELECT * FROM ${table} ORDER BY ${order}`;
const snapshot = (d: Db) => ({
  rows: d.prepare(ALL('usage_ledger', 'id')).all(),
  hours: d.prepare(ALL('usage_hours', 'hour, engine, model, payer, basis, turn_id')).all(),
  dirty: d.prepare(ALL('usage_hours_dirty', 'hour')).all(),
  mark: d.prepare(ALL('usage_hours_mark', 'one')).all(),
  seq: d.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'usage_ledger'").pluck().get(),
});

it('keeps every row, id, counter and rollup; the key is (source_id, meter) and still unique', async () => {
  db = openDb(
    path,
    MIGRATIONS.filter((m) => m.version < 22),
  );
  const before = new SqliteLedgerStore(db);
  await before.add(
    Array.from({ length: 120 }, (_, i) => entry(i)),
    pricer,
  );
  // The last rows deleted: their ids must stay unused. One row changed: its hour is dirty.
  db.prepare('DELETE FROM usage_ledger WHERE id > 115').run();
  db.prepare('UPDATE usage_ledger SET output_tokens = output_tokens + 1 WHERE id = 3').run();
  const old = snapshot(db);
  expect(old.seq).toBe(120);
  expect(old.dirty.length).toBeGreaterThan(0);
  db.close();

  db = openDb(path);
  expect(db.prepare('SELECT name FROM schema_migrations WHERE version = 22').get()).toEqual({
    name: 'ledger-source-key',
  });
  expect(snapshot(db)).toEqual(old);
  const indexes = db
    .prepare(
      "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'usage_ledger' ORDER BY name",
    )
    .pluck()
    .all();
  expect(indexes).toEqual([
    'usage_ledger_at',
    'usage_ledger_session',
    'usage_ledger_source',
    'usage_ledger_turn',
    'usage_ledger_unpriced',
    'usage_ledger_work_item',
  ]);
  expect(db.prepare('PRAGMA index_info(usage_ledger_source)').all()).toMatchObject([
    { name: 'source_id' },
    { name: 'meter' },
  ]);

  // The key: a second (meter, source id) is not added; the same id of another meter is.
  const after = new SqliteLedgerStore(db);
  expect(await after.add([entry(1), entry(1, { meter: 'otel' })], pricer)).toBe(1);
  // The counter went on past the deleted rows (an insert that met the key may use a number up).
  expect(db.prepare("SELECT id FROM usage_ledger WHERE meter = 'otel'").pluck().get()).toBeGreaterThan(120);
  // The triggers: a change and a delete mark their hours.
  db.prepare('DELETE FROM usage_hours_dirty').run();
  db.prepare("DELETE FROM usage_ledger WHERE source_id = 'msg_2'").run();
  expect(db.prepare('SELECT hour FROM usage_hours_dirty').pluck().all()).toEqual([entry(2).at.slice(0, 13)]);
  db.prepare("UPDATE usage_ledger SET output_tokens = 1 WHERE source_id = 'msg_4'").run();
  expect(db.prepare('SELECT COUNT(*) FROM usage_hours_dirty').pluck().get()).toBe(2);
  // The lookups of the key use it.
  const plan = db
    .prepare("EXPLAIN QUERY PLAN DELETE FROM usage_ledger WHERE meter = 'transcript' AND source_id = ?")
    .all('msg_5') as Array<{ detail: string }>;
  expect(plan.map((p) => p.detail).join('\n')).toMatch(/USING INDEX usage_ledger_source/);
});

it('makes a new registry with the same ledger as an upgraded one', () => {
  db = openDb(path);
  const fresh = db
    .prepare("SELECT type, name, sql FROM sqlite_schema WHERE tbl_name = 'usage_ledger' ORDER BY name")
    .all();
  db.close();
  const upgraded = join(dir, 'upgraded.db');
  openDb(
    upgraded,
    MIGRATIONS.filter((m) => m.version < 22),
  ).close();
  db = openDb(upgraded);
  expect(
    db
      .prepare("SELECT type, name, sql FROM sqlite_schema WHERE tbl_name = 'usage_ledger' ORDER BY name")
      .all(),
  ).toEqual(fresh);
});
