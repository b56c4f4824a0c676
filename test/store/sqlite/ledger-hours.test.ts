/**
 * The ledger's hourly rollup (usage_hours): whatever was written — new rows, corrected copies, rows
 * taken out again, rows priced later — the report read from it is the report read from the ledger's
 * rows alone, to the last bit of its dollars, for every grouping and for windows cut anywhere.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GROUP_BY, type LedgerEntry, type Pricer } from '../../../src/core/ports/ledger.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';
import { rebuildAllHours } from '../../../src/store/sqlite/ledger-hours.js';
import { usageReport } from '../../../src/store/sqlite/ledger-report.js';

let dir: string;
let db: Db;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-usage-hours-'));
});

afterEach(() => {
  if (db?.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A small deterministic generator (mulberry32): the same rows at every run. */
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
const SPAN = 3 * 86_400_000;

function entries(rand: () => number, n: number, prefix: string): LedgerEntry[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  return Array.from({ length: n }, (_, i) => ({
    meter: pick(['transcript', 'transcript', 'stream-json', 'otel'] as const),
    sourceId: `${prefix}-${i}`,
    at: new Date(START + Math.floor(rand() * SPAN)).toISOString(),
    sessionId: pick([null, 's1', 's2']),
    workItem: pick([null, 'github:o/r#1', 'github:o/r#2']),
    turnId: pick([null, null, 0, 1, 2, 3]),
    engine: pick([null, 'claude', 'codex']),
    runner: pick([null, 'process']),
    model: pick([null, 'model-a', 'model-b', 'later-model']),
    usage: {
      inputTokens: Math.floor(rand() * 5000),
      outputTokens: Math.floor(rand() * 900),
      cacheReadTokens: Math.floor(rand() * 40_000),
      cacheCreationTokens: Math.floor(rand() * 2000),
      reasoningTokens: Math.floor(rand() * 100),
    },
    engineCostUsd: rand() < 0.1 ? rand() / 7 : null,
    payer: pick([
      { kind: 'subscription', id: null },
      { kind: 'api-key', id: 'key:aaaaaaaaaaaa' },
      { kind: 'unknown', id: null },
    ] as const),
  }));
}

/** Dollars with all their bits (3e-6, 1.5e-5 … are not exact in binary); `later-model` first unknown. */
const pricer =
  (knowsLater: boolean): Pricer =>
  (e) => {
    if (e.engineCostUsd != null)
      return { costUsd: e.engineCostUsd, basis: 'engine-reported', priceKey: null, outputUnit: null };
    if (e.model === null || (e.model === 'later-model' && !knowsLater))
      return { costUsd: null, basis: null, priceKey: null, outputUnit: null };
    const unit = e.model === 'model-a' ? 1.5e-5 : 7.7e-6;
    return {
      costUsd: e.usage.inputTokens * 3e-6 + e.usage.outputTokens * unit + e.usage.cacheReadTokens * 3.1e-7,
      basis: 'list-price',
      priceKey: e.model,
      outputUnit: unit,
    };
  };

/** Windows cut at hours, inside one hour, across days, and around the whole ledger. */
function windows(rand: () => number): Array<{ since: Date; until: Date }> {
  const at = (ms: number) => new Date(START + ms);
  const fixed = [
    { since: at(-86_400_000), until: at(SPAN + 86_400_000) },
    { since: at(0), until: at(SPAN) },
    { since: at(3_600_000), until: at(5 * 3_600_000) },
    { since: at(3_600_000 + 1), until: at(3_600_000 + 1000) },
    { since: at(7_200_000 - 1), until: at(10_800_000 + 1) },
  ];
  const drawn = Array.from({ length: 25 }, () => {
    const a = Math.floor(rand() * SPAN);
    const b = Math.floor(rand() * SPAN);
    return { since: at(Math.min(a, b)), until: at(Math.max(a, b) + 1) };
  });
  return [...fixed, ...drawn];
}

function expectSameReports(rand: () => number): void {
  for (const w of windows(rand)) {
    for (const by of GROUP_BY) {
      const filter = { ...w, by };
      expect(usageReport(db, filter)).toEqual(usageReport(db, filter, { rollup: false }));
    }
  }
}

describe('usage_hours', () => {
  it("gives the ledger's report after adds, corrections, removals and repricing", async () => {
    db = openDb(join(dir, 'the-loop.db'));
    const store = new SqliteLedgerStore(db);
    const rand = random(16);
    const first = entries(rand, 1500, 'a');
    await store.add(first, pricer(false));
    // Later copies with larger output counts correct their rows (some gain a turn on the way).
    const copies = first
      .filter(() => rand() < 0.2)
      .map((e) => ({
        ...e,
        usage: { ...e.usage, outputTokens: e.usage.outputTokens + 17 },
        turnId: e.turnId ?? (rand() < 0.5 ? 5 : null),
      }));
    await store.add(copies, pricer(false), 'settled');
    const imported = entries(rand, 1500, 'b').map((e) => ({
      ...e,
      meter: 'transcript' as const,
      turnId: null,
    }));
    const run = await store.beginImport({ commitEveryMs: 0 });
    await run.write({ add: imported.slice(0, 800), correct: [], remove: [] }, pricer(false));
    await run.write(
      {
        add: imported.slice(800),
        correct: imported.slice(0, 100).map((e) => ({ ...e, usage: { ...e.usage, outputTokens: 5000 } })),
        remove: imported.slice(100, 160).map((e) => e.sourceId),
      },
      pricer(false),
    );
    await run.finish();
    expectSameReports(rand);
    expect(await store.repriceUnknown(pricer(true))).toBeGreaterThan(0);
    expectSameReports(rand);
  });

  it('is what computing it again from the ledger gives', async () => {
    db = openDb(join(dir, 'the-loop.db'));
    const store = new SqliteLedgerStore(db);
    const rand = random(7);
    const rows = entries(rand, 600, 'c');
    for (let i = 0; i < rows.length; i += 50) await store.add(rows.slice(i, i + 50), pricer(false));
    await store.add(
      rows.slice(0, 80).map((e) => ({ ...e, usage: { ...e.usage, outputTokens: 9999 } })),
      pricer(false),
    );
    const table = () =>
      db
        .prepare(
          'SELECT hour, engine, model, payer, basis, turn_id, row_count, input, output, cache_read, cache_creation, reasoning, priced FROM usage_hours ORDER BY 1, 2, 3, 4, 5, 6',
        )
        .all();
    const kept = table();
    db.transaction(() => rebuildAllHours(db))();
    expect(table()).toEqual(kept);
  });

  it('stays right beside a writer that does not know it (an older daemon), and is repaired by the next write', async () => {
    db = openDb(join(dir, 'the-loop.db'));
    const store = new SqliteLedgerStore(db);
    const rand = random(3);
    const rows = entries(rand, 800, 'e');
    await store.add(rows, pricer(false));
    // What an older the-loop does: rows inserted, corrected and deleted without the rollup.
    db.prepare(
      `INSERT INTO usage_ledger (meter, source_id, at, model, input_tokens, output_tokens, cache_read_tokens,
         cache_creation_tokens, reasoning_tokens, cost_usd, cost_basis, payer_kind, recorded_at)
       VALUES ('transcript', 'old-1', '2026-03-02T05:30:00.000Z', 'model-a', 10, 20, 30, 40, 0, 0.25, 'list-price',
         'subscription', '2026-03-05T00:00:00.000Z')`,
    ).run();
    db.prepare('UPDATE usage_ledger SET output_tokens = output_tokens + 1000 WHERE source_id = ?').run('e-1');
    db.prepare('DELETE FROM usage_ledger WHERE source_id = ?').run('e-2');
    expectSameReports(rand);
    await store.add(entries(rand, 10, 'f'), pricer(false));
    expect(db.prepare('SELECT COUNT(*) AS n FROM usage_hours_dirty').get()).toEqual({ n: 0 });
    expectSameReports(rand);
    const kept = db.prepare('SELECT * FROM usage_hours ORDER BY 1, 2, 3, 4, 5, 6').all();
    db.transaction(() => rebuildAllHours(db))();
    expect(db.prepare('SELECT * FROM usage_hours ORDER BY 1, 2, 3, 4, 5, 6').all().length).toBe(kept.length);
  });

  it('a sum that overflows (a hostile meter reporting 1e308 dollars) never stops the ledger', async () => {
    db = openDb(join(dir, 'the-loop.db'));
    const store = new SqliteLedgerStore(db);
    const huge = (prefix: string, n: number): LedgerEntry[] =>
      entries(random(11), n, prefix).map((e) => ({
        ...e,
        at: new Date(START).toISOString(),
        engine: 'claude',
        model: 'model-a',
        turnId: null,
        payer: { kind: 'unknown', id: null },
        engineCostUsd: 1e308,
      }));
    // One bucket, in one write and then one row at a time (the upsert's own arithmetic).
    await store.add(huge('h', 3), pricer(false));
    for (let i = 0; i < 3; i++) await store.add(huge(`g${i}`, 1), pricer(false));
    // A correction marks the hour: the next write computes it again from the rows.
    await store.add(
      huge('h', 1).map((e) => ({ ...e, engineCostUsd: 1e307 })),
      pricer(false),
    );
    await store.add(entries(random(12), 5, 'after'), pricer(false));
    db.transaction(() => rebuildAllHours(db))();
    const report = usageReport(db, {
      since: new Date(START - 3_600_000),
      until: new Date(START + SPAN),
      by: 'model',
    });
    expect(report.total.rows).toBeGreaterThanOrEqual(11);
  });

  it('migration 20 fills it from the rows a registry already has', () => {
    const path = join(dir, 'the-loop.db');
    db = openDb(
      path,
      MIGRATIONS.filter((m) => m.version < 20),
    );
    const insert = db.prepare(
      `INSERT INTO usage_ledger (meter, source_id, at, session_id, work_item, turn_id, engine, runner, model,
         input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
         cost_usd, cost_basis, payer_kind, payer_id, recorded_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const rand = random(20);
    const price = pricer(false);
    for (const e of entries(rand, 2000, 'd')) {
      const p = price(e);
      const u = e.usage;
      insert.run(
        e.meter,
        e.sourceId,
        e.at,
        e.sessionId,
        e.workItem,
        e.turnId,
        e.engine,
        e.runner,
        e.model,
        u.inputTokens,
        u.outputTokens,
        u.cacheReadTokens,
        u.cacheCreationTokens,
        u.reasoningTokens,
        p.costUsd,
        p.basis,
        e.payer.kind,
        e.payer.id,
        '2026-03-05T00:00:00.000Z',
      );
    }
    db.close();
    db = openDb(path);
    expect((db.prepare('SELECT SUM(row_count) AS n FROM usage_hours').get() as { n: number }).n).toBe(2000);
    expectSameReports(rand);
  });
});
