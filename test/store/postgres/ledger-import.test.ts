/**
 * The PostgreSQL ledger with two hosts at once: an import holds its transaction on a connection of
 * its own, and row locks only — another host's writes of other rows go on meanwhile, one of a row it
 * holds waits for its commit; an aborted or failed import gives its connection back; two hosts
 * correcting the same rows in opposite orders do not deadlock.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LedgerEntry, Pricer } from '../../../src/core/ports/ledger.js';
import { PgLedgerStore } from '../../../src/store/postgres/ledger.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { freshDatabase } from '../../helpers/postgres.js';

const entry = (sourceId: string, output = 5, extra: Partial<LedgerEntry> = {}): LedgerEntry => ({
  meter: 'transcript',
  sourceId,
  at: '2026-03-01T10:00:00.000Z',
  sessionId: null,
  workItem: null,
  turnId: null,
  engine: 'claude',
  runner: null,
  model: 'm',
  usage: {
    inputTokens: 10,
    outputTokens: output,
    cacheReadTokens: 0,
    cacheCreationTokens: 0,
    reasoningTokens: 0,
  },
  payer: { kind: 'subscription', id: null },
  ...extra,
});

const perOutput: Pricer = (e) => ({
  costUsd: e.usage.outputTokens,
  basis: 'list-price',
  priceKey: 'm',
  outputUnit: 1,
});

const ALL = { since: new Date('2000-01-01'), until: new Date('2100-01-01'), by: 'day' as const };

const pools: Pg[] = [];
let url: string;
let drop: () => Promise<void>;

beforeEach(async () => {
  const database = await freshDatabase();
  url = database.url;
  drop = database.drop;
});

afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.close();
  await drop();
});

async function host(max = 4): Promise<PgLedgerStore> {
  const db = await openPg(url, { max });
  pools.push(db);
  return new PgLedgerStore(db);
}

describe('PostgreSQL ledger, two hosts', () => {
  it("an import's open transaction holds only its rows: other writes go on, one of its rows waits for its commit", async () => {
    const scan = await host();
    const daemon = await host();
    const run = await scan.beginImport({ commitEveryMs: 60_000 });
    await run.write({ add: [entry('a'), entry('b')], correct: [], remove: [] }, perOutput);
    // Other rows, and reads, at once.
    expect(await daemon.add([entry('c')], perOutput)).toBe(1);
    expect((await daemon.report(ALL)).total.rows).toBe(1);
    // A row the import holds: waits until the import commits, then is a copy (its larger output corrects it).
    let settled = false;
    const waiting = daemon.add([entry('a', 9)], perOutput).then((n) => {
      settled = true;
      return n;
    });
    await new Promise((go) => setTimeout(go, 300));
    expect(settled).toBe(false);
    await run.commit(true);
    expect(await waiting).toBe(1);
    await run.finish();
    const report = await daemon.report(ALL);
    expect(report.total).toMatchObject({ rows: 3, costUsd: 19 });
  });

  it('an aborted import, and one whose piece fails, give their connection back', async () => {
    const scan = await host(1);
    const run = await scan.beginImport({ commitEveryMs: 60_000 });
    await run.write({ add: [entry('a')], correct: [], remove: [] }, perOutput);
    await run.abort();
    await run.abort();
    // The pool's one connection is free again (this would wait forever otherwise).
    expect((await scan.report(ALL)).total.rows).toBe(0);
    const failing = await scan.beginImport({ commitEveryMs: 60_000 });
    const refused = entry('x', 1, { payer: { kind: 'bogus' as 'unknown', id: null } });
    await expect(
      failing.write({ add: [entry('b'), refused], correct: [], remove: [] }, perOutput),
    ).rejects.toThrow();
    expect(await scan.add([entry('c')], perOutput)).toBe(1);
    await failing.finish();
    expect((await scan.report(ALL)).total.rows).toBe(1);
  });

  it('two hosts writing and correcting the same rows in opposite orders at once never deadlock', async () => {
    const one = await host();
    const two = await host();
    await one.add(
      Array.from({ length: 3000 }, (_, i) => entry(`r${i}`)),
      perOutput,
    );
    for (let round = 0; round < 6; round++) {
      const ids = Array.from({ length: 500 }, (_, i) => `r${round * 500 + i}`);
      const fresh = Array.from({ length: 500 }, (_, i) => `n${round * 500 + i}`);
      const [a, b] = await Promise.all([
        one.add(
          [...ids, ...fresh].map((id) => entry(id, 7)),
          perOutput,
        ),
        two.add(
          [...ids, ...fresh].reverse().map((id) => entry(id, 9)),
          perOutput,
        ),
      ]);
      // Each row added or corrected by the first to write it, and corrected again by the other if its output is larger.
      expect(a + b).toBeGreaterThanOrEqual(1000);
      expect(a + b).toBeLessThanOrEqual(2000);
    }
    expect((await one.report(ALL)).total).toMatchObject({ rows: 6000 });
    // Deadlocks (PostgreSQL would break each, and the write run again) counted by the server: none.
    for (const pool of pools.splice(0)) await pool.close();
    const db = await openPg(url, { max: 1 });
    pools.push(db);
    const stats = await db.row<{ deadlocks: number }>(
      'SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()',
    );
    expect(stats?.deadlocks).toBe(0);
  });

  it('stores text with a NUL (which PostgreSQL cannot) as U+FFFD, the same every time', async () => {
    const ledger = await host();
    const odd = entry('id\u0000odd', 5, { model: 'mo\u0000del' });
    expect(await ledger.add([odd], perOutput)).toBe(1);
    expect(await ledger.add([odd], perOutput)).toBe(0);
    expect((await ledger.report({ ...ALL, by: 'model' })).groups.map((g) => g.key)).toEqual(['mo\uFFFDdel']);
    const run = await ledger.beginImport({ commitEveryMs: 60_000 });
    await run.write({ add: [entry('id\u0000two')], correct: [], remove: [] }, perOutput);
    expect(await run.write({ add: [], correct: [], remove: ['id\u0000two'] }, perOutput)).toEqual({
      added: 0,
      removedOwn: 1,
    });
    await run.finish();
    expect((await ledger.report(ALL)).total.rows).toBe(1);
  });
});
