/**
 * The LedgerStore contract: a row once per (meter, source id) whoever writes it at once, a later
 * copy with a larger output correcting its row, waiting drives settled in the same write, one drive
 * per turn, imports committed in batches and dropped whole when aborted, reports in a stable order
 * over a half-open window, everything across a restart, and sessions' costs (by session and by
 * turn, unpriced rows counted, never a $0 for nothing priced).
 */
import { describe, expect, it } from 'vitest';
import type { LedgerStore, Pricer } from '../../../src/core/ports/ledger.js';
import { type StoreFactory, useStore } from './factory.js';
import { entry, perOutputToken, usage } from './fixtures.js';

const ALL_TIME = { since: new Date('2000-01-01'), until: new Date('2100-01-01'), by: 'day' as const };
const totalRows = async (ledger: LedgerStore) => (await ledger.report(ALL_TIME)).total.rows;
const drives = async (ledger: LedgerStore) =>
  (await ledger.report(ALL_TIME)).notIncluded.unmetered.map((u) => [u.reason, u.count]);
const drive = (turnId: number, reason: string, at = '2026-03-01T10:00:00.000Z') => ({
  at,
  sessionId: null,
  workItem: null,
  turnId,
  engine: 'claude',
  runner: 'process',
  reason,
});

export function ledgerContract(factory: StoreFactory): void {
  describe(`LedgerStore contract (${factory.name})`, () => {
    describe('rows and drives', () => rowsAndDrives(factory));
    describe('restart, imports, reports', () => importsReportsAndRestart(factory));
    describe("sessions' costs", () => sessionCosts(factory));
  });
}

/** `m`: a dollar per output token (list price); `e`: what the engine said; anything else: unpriced. */
const mixedPrices: Pricer = (e) => {
  if (e.model === 'm') return perOutputToken(e);
  if (e.model === 'e') return { costUsd: 0.5, basis: 'engine-reported', priceKey: null, outputUnit: null };
  return { costUsd: null, basis: null, priceKey: null, outputUnit: null };
};

function sessionCosts(factory: StoreFactory): void {
  const { store } = useStore(factory);

  it('sums priced rows per session and per turn, counts the unpriced ones; a session without rows is absent', async () => {
    await store().ledger.add(
      [
        entry({ sourceId: 'a', sessionId: 's-1', turnId: 1 }),
        entry({ sourceId: 'b', sessionId: 's-1', turnId: 1, model: 'mystery' }),
        entry({ sourceId: 'c', sessionId: 's-1', turnId: 2, model: 'e' }),
        // Between turns (a person driving the TUI): the session's, no turn's.
        entry({ sourceId: 'd', sessionId: 's-1', turnId: null }),
        entry({ sourceId: 'e', sessionId: 's-2', turnId: 3, model: 'mystery' }),
        entry({ sourceId: 'f', sessionId: null, turnId: null }),
      ],
      mixedPrices,
    );
    const costs = await store().ledger.sessionCosts(['s-1', 's-2', 's-none']);
    expect([...costs.keys()].sort()).toEqual(['s-1', 's-2']);
    const one = costs.get('s-1');
    expect(one?.total).toEqual({
      costUsd: 10.5,
      rows: 4,
      unpricedRows: 1,
      bases: ['engine-reported', 'list-price'],
    });
    expect([...(one?.turns.keys() ?? [])].sort()).toEqual([1, 2]);
    expect(one?.turns.get(1)).toEqual({ costUsd: 5, rows: 2, unpricedRows: 1, bases: ['list-price'] });
    expect(one?.turns.get(2)).toEqual({ costUsd: 0.5, rows: 1, unpricedRows: 0, bases: ['engine-reported'] });
    // Nothing priced: unknown, never $0.
    const two = costs.get('s-2');
    expect(two?.total).toEqual({ costUsd: null, rows: 1, unpricedRows: 1, bases: [] });
    expect(two?.turns.get(3)).toEqual({ costUsd: null, rows: 1, unpricedRows: 1, bases: [] });
    expect((await store().ledger.sessionCosts([])).size).toBe(0);
  });

  it('answers for any number of sessions, each id once however often it is asked', async () => {
    const ids = Array.from({ length: 1_234 }, (_, i) => `s-${i}`);
    const priced = ['s-0', 's-499', 's-500', 's-1000', 's-1233'];
    await store().ledger.add(
      priced.map((id, i) => entry({ sourceId: `r-${i}`, sessionId: id, turnId: i + 1 })),
      perOutputToken,
    );
    const costs = await store().ledger.sessionCosts([...ids, 's-500', 's-0']);
    expect([...costs.keys()].sort()).toEqual([...priced].sort());
    for (const id of priced) expect(costs.get(id)?.total).toMatchObject({ costUsd: 5, rows: 1 });
  });
}

function rowsAndDrives(factory: StoreFactory): void {
  const { store } = useStore(factory);

  it('adds a row once per (meter, source id); the same id under another meter is another row', async () => {
    const e = entry({ sourceId: 'req_1' });
    expect(await store().ledger.add([e], perOutputToken)).toBe(1);
    expect(await store().ledger.add([e], perOutputToken)).toBe(0);
    expect(await store().ledger.add([e, e], perOutputToken)).toBe(0);
    expect(await store().ledger.add([{ ...e, meter: 'otel' }], perOutputToken)).toBe(1);
    expect(await store().ledger.add([], perOutputToken)).toBe(0);
    expect(await totalRows(store().ledger)).toBe(2);
  });

  it('a later copy with a larger output corrects its row, repriced for the extra output only', async () => {
    const e = entry({ sourceId: 'req_1', turnId: 7, usage: usage(10, 5) });
    await store().ledger.add([e], perOutputToken);
    expect(await store().ledger.add([{ ...e, usage: usage(10, 3) }], perOutputToken)).toBe(0);
    expect(await store().ledger.add([{ ...e, usage: usage(999, 8) }], perOutputToken)).toBe(1);
    expect(await store().ledger.turnTotals(7)).toEqual({ usage: usage(10, 8), model: 'm' });
    expect((await store().ledger.report(ALL_TIME)).total.costUsd).toBe(8);
  });

  it('a row first recorded without a turn gets the turn that records it', async () => {
    const e = entry({ sourceId: 'req_1' });
    await store().ledger.add([e], perOutputToken);
    expect(await store().ledger.turnHasRows(7)).toBe(false);
    expect(await store().ledger.add([{ ...e, turnId: 7 }], perOutputToken)).toBe(1);
    expect(await store().ledger.turnHasRows(7)).toBe(true);
    expect(await totalRows(store().ledger)).toBe(1);
  });

  it("settles the waiting drives of the rows' turns with that reason, in the same write", async () => {
    await store().ledger.recordUnmetered(drive(7, 'waiting'));
    await store().ledger.recordUnmetered(drive(8, 'waiting'));
    await store().ledger.recordUnmetered(drive(9, 'lost'));
    await store().ledger.add(
      [entry({ sourceId: 'a', turnId: 7 }), entry({ sourceId: 'b', turnId: 9 })],
      perOutputToken,
      'waiting',
    );
    const left = await drives(store().ledger);
    expect(left).toHaveLength(2);
    expect(left).toEqual(
      expect.arrayContaining([
        ['waiting', 1],
        ['lost', 1],
      ]),
    );
  });

  it('records one unmetered drive per turn', async () => {
    await store().ledger.recordUnmetered(drive(7, 'no meter'));
    await store().ledger.recordUnmetered(drive(7, 'no meter again'));
    expect(await drives(store().ledger)).toEqual([['no meter', 1]]);
  });

  it('answers a turn without rows, and an empty window, with nothing', async () => {
    expect(await store().ledger.turnHasRows(987_654)).toBe(false);
    expect(await store().ledger.turnTotals(987_654)).toBeUndefined();
    const report = await store().ledger.report(ALL_TIME);
    expect(report.groups).toEqual([]);
    expect(report.total).toMatchObject({ rows: 0, turns: 0, costUsd: null, usage: usage(0, 0) });
    expect(report.notIncluded).toEqual({
      unmetered: [],
      unmeteredCount: 0,
      unpricedModels: [],
      unpricedRows: 0,
    });
  });

  it('two writers adding the same rows at once store each once', async () => {
    const other = await store().second();
    const rows = Array.from({ length: 50 }, (_, i) => entry({ sourceId: `req_${i}` }));
    const added = await Promise.all([
      store().ledger.add(rows, perOutputToken),
      other.ledger.add([...rows].reverse(), perOutputToken),
    ]);
    expect(added[0] + added[1]).toBe(50);
    expect(await totalRows(other.ledger)).toBe(50);
  });

  it('two writers recording a drive of one turn at once keep one', async () => {
    const other = await store().second();
    await Promise.all([
      store().ledger.recordUnmetered(drive(7, 'first')),
      other.ledger.recordUnmetered(drive(7, 'second')),
    ]);
    expect((await store().ledger.report(ALL_TIME)).notIncluded.unmeteredCount).toBe(1);
  });
}

function importsReportsAndRestart(factory: StoreFactory): void {
  const { store, restart } = useStore(factory);

  it('keeps rows and drives across a restart', async () => {
    await store().ledger.add([entry({ sourceId: 'a', turnId: 3 })], perOutputToken);
    await store().ledger.recordUnmetered(drive(4, 'unmetered'));
    const before = await store().ledger.report(ALL_TIME);
    const after = (await restart()).ledger;
    expect(await after.report(ALL_TIME)).toEqual(before);
    expect(await after.turnHasRows(3)).toBe(true);
    expect(await after.add([entry({ sourceId: 'a', turnId: 3 })], perOutputToken)).toBe(0);
    await after.recordUnmetered(drive(4, 'again'));
    expect(await drives(after)).toEqual([['unmetered', 1]]);
  });

  it('an import: committed pieces stay, an aborted one is dropped whole; removals of its own rows counted', async () => {
    await store().ledger.add([entry({ sourceId: 'before' })], perOutputToken);
    const first = await store().ledger.beginImport({ commitEveryMs: 60_000 });
    const one = await first.write(
      { add: [entry({ sourceId: 'a' }), entry({ sourceId: 'b' })], correct: [], remove: [] },
      perOutputToken,
    );
    expect(one).toEqual({ added: 2, removedOwn: 0 });
    await first.commit(true);
    const two = await first.write(
      {
        add: [entry({ sourceId: 'c' })],
        correct: [entry({ sourceId: 'a', usage: usage(10, 50) })],
        remove: ['b', 'unknown'],
      },
      perOutputToken,
    );
    expect(two).toEqual({ added: 1, removedOwn: 1 });
    await first.abort();
    // a and b as committed; the aborted piece (c, a's correction, the removals) is gone.
    expect(await totalRows(store().ledger)).toBe(3);
    expect((await store().ledger.report(ALL_TIME)).total.usage.outputTokens).toBe(15);

    const second = await store().ledger.beginImport({ commitEveryMs: 60_000 });
    await second.write({ add: [entry({ sourceId: 'c' })], correct: [], remove: ['a'] }, perOutputToken);
    await second.finish();
    const after = (await restart()).ledger;
    expect(await totalRows(after)).toBe(3);
  });

  it('an import whose piece fails to be written drops what it had not committed, and ends', async () => {
    const writes = await store().ledger.beginImport({ commitEveryMs: 60_000 });
    await writes.write({ add: [entry({ sourceId: 'kept' })], correct: [], remove: [] }, perOutputToken);
    await writes.commit(true);
    await writes.write({ add: [entry({ sourceId: 'pending' })], correct: [], remove: [] }, perOutputToken);
    // A row the store refuses (no such payer kind), after one it took in the same piece.
    const refused = entry({ sourceId: 'refused', payer: { kind: 'bogus' as 'unknown', id: null } });
    await expect(
      writes.write({ add: [entry({ sourceId: 'half' }), refused], correct: [], remove: [] }, perOutputToken),
    ).rejects.toThrow();
    await expect(
      writes.write({ add: [entry({ sourceId: 'late' })], correct: [], remove: [] }, perOutputToken),
    ).rejects.toThrow(/ended/);
    await writes.finish();
    expect(await totalRows(store().ledger)).toBe(1);
    // The store takes writes again.
    expect(await store().ledger.add([entry({ sourceId: 'after' })], perOutputToken)).toBe(1);
  });

  it('reports groups in key order and drives newest first, over [since, until)', async () => {
    await store().ledger.add(
      [
        entry({ sourceId: 'x', at: '2026-03-02T00:00:00.000Z' }),
        entry({ sourceId: 'y', at: '2026-03-01T00:00:00.000Z' }),
        entry({ sourceId: 'z', at: '2026-03-03T00:00:00.000Z' }),
      ],
      perOutputToken,
    );
    await store().ledger.recordUnmetered(drive(1, 'older', '2026-03-01T00:00:00.000Z'));
    await store().ledger.recordUnmetered(drive(2, 'newer', '2026-03-02T00:00:00.000Z'));
    const report = await store().ledger.report(ALL_TIME);
    expect(report.groups.map((g) => g.key)).toEqual(['2026-03-01', '2026-03-02', '2026-03-03']);
    expect(report.notIncluded.unmetered.map((u) => u.reason)).toEqual(['newer', 'older']);
    const window = await store().ledger.report({
      since: new Date('2026-03-01T00:00:00.000Z'),
      until: new Date('2026-03-03T00:00:00.000Z'),
      by: 'day',
    });
    expect(window.groups.map((g) => g.key)).toEqual(['2026-03-01', '2026-03-02']);
    expect(window.total.rows).toBe(2);
  });

  it('groups by work item and by payer; an unpriced row counts its tokens, not a cost', async () => {
    await store().ledger.add(
      [
        entry({ sourceId: 'a', workItem: 'github:octo/widgets#1', sessionId: 's-1', turnId: 1 }),
        entry({ sourceId: 'b', workItem: 'github:octo/widgets#1', sessionId: 's-1', turnId: 1 }),
        entry({ sourceId: 'c', workItem: 'github:octo/widgets#2', model: 'unknown-model' }),
      ],
      (e) =>
        e.model === 'm'
          ? perOutputToken(e)
          : { costUsd: null, basis: null, priceKey: null, outputUnit: null },
    );
    const byItem = await store().ledger.report({ ...ALL_TIME, by: 'work-item' });
    expect(byItem.groups.map((g) => [g.key, g.rows, g.turns, g.costUsd, g.unpricedRows])).toEqual([
      ['github:octo/widgets#1', 2, 1, 10, 0],
      ['github:octo/widgets#2', 1, 0, null, 1],
    ]);
    expect(byItem.total).toMatchObject({ rows: 3, costUsd: 10, unpricedRows: 1, usage: usage(30, 15) });
    expect(byItem.notIncluded).toMatchObject({ unpricedModels: ['unknown-model'], unpricedRows: 1 });
    expect((await store().ledger.report({ ...ALL_TIME, by: 'payer' })).groups.map((g) => g.key)).toEqual([
      'unknown',
    ]);
  });
}
