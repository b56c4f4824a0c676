/**
 * The LedgerStore contract: what any store of the usage ledger must do (idempotent rows, corrections,
 * waiting drives settled in the same write, one drive per turn, imports that commit in batches),
 * whoever writes at once and across a restart.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../../src/core/ports/ledger.js';
import { entry, type OpenWorld, type PortWorld, perOutputToken, usage } from './world.js';

const ALL_TIME = { since: new Date('2000-01-01'), until: new Date('2100-01-01') };
const totalRows = async (ledger: LedgerStore) => (await ledger.report({ ...ALL_TIME, by: 'day' })).total.rows;
const drives = async (ledger: LedgerStore) =>
  (await ledger.report({ ...ALL_TIME, by: 'day' })).notIncluded.unmetered.map((u) => [u.reason, u.count]);
const drive = (turnId: number, reason: string) => ({
  at: '2026-03-01T10:00:00.000Z',
  sessionId: null,
  workItem: null,
  turnId,
  engine: 'claude',
  runner: 'process',
  reason,
});

export function ledgerContract(open: OpenWorld): void {
  describe('LedgerStore contract', () => {
    let world: PortWorld;
    const extra: PortWorld[] = [];
    beforeEach(async () => {
      world = await open({ scrub: (t) => t });
    });
    afterEach(async () => {
      for (const w of extra.splice(0)) await w.close();
      await world.close();
    });

    it('adds a row once per (meter, source id); the same id under another meter is another row', async () => {
      const e = entry({ sourceId: 'req_1' });
      expect(await world.ledger.add([e], perOutputToken)).toBe(1);
      expect(await world.ledger.add([e], perOutputToken)).toBe(0);
      expect(await world.ledger.add([{ ...e, meter: 'otel' }], perOutputToken)).toBe(1);
      expect(await totalRows(world.ledger)).toBe(2);
    });

    it('a later copy with a larger output corrects its row, repriced for the extra output only', async () => {
      const e = entry({ sourceId: 'req_1', turnId: 7, usage: usage(10, 5) });
      await world.ledger.add([e], perOutputToken);
      expect(await world.ledger.add([{ ...e, usage: usage(10, 3) }], perOutputToken)).toBe(0);
      expect(await world.ledger.add([{ ...e, usage: usage(999, 8) }], perOutputToken)).toBe(1);
      expect(await world.ledger.turnTotals(7)).toEqual({ usage: usage(10, 8), model: 'm' });
      expect((await world.ledger.report({ ...ALL_TIME, by: 'day' })).total.costUsd).toBe(8);
    });

    it('a row first recorded without a turn gets the turn that records it', async () => {
      const e = entry({ sourceId: 'req_1' });
      await world.ledger.add([e], perOutputToken);
      expect(await world.ledger.turnHasRows(7)).toBe(false);
      expect(await world.ledger.add([{ ...e, turnId: 7 }], perOutputToken)).toBe(1);
      expect(await world.ledger.turnHasRows(7)).toBe(true);
      expect(await world.ledger.turnTotals(8)).toBeUndefined();
    });

    it("settles the waiting drives of the rows' turns with that reason, in the same write", async () => {
      await world.ledger.recordUnmetered(drive(7, 'waiting'));
      await world.ledger.recordUnmetered(drive(8, 'waiting'));
      await world.ledger.recordUnmetered(drive(9, 'lost'));
      await world.ledger.add(
        [entry({ sourceId: 'a', turnId: 7 }), entry({ sourceId: 'b', turnId: 9 })],
        perOutputToken,
        'waiting',
      );
      expect(await drives(world.ledger)).toEqual(
        expect.arrayContaining([
          ['waiting', 1],
          ['lost', 1],
        ]),
      );
      expect(await drives(world.ledger)).toHaveLength(2);
    });

    it('records one unmetered drive per turn', async () => {
      await world.ledger.recordUnmetered(drive(7, 'no meter'));
      await world.ledger.recordUnmetered(drive(7, 'no meter again'));
      expect(await drives(world.ledger)).toEqual([['no meter', 1]]);
    });

    it('two writers adding the same rows at once store each once', async () => {
      const other = await world.another();
      extra.push(other);
      const rows = Array.from({ length: 50 }, (_, i) => entry({ sourceId: `req_${i}` }));
      const added = await Promise.all([
        world.ledger.add(rows, perOutputToken),
        other.ledger.add([...rows].reverse(), perOutputToken),
      ]);
      expect(added[0] + added[1]).toBe(50);
      expect(await totalRows(world.ledger)).toBe(50);
    });

    it('keeps rows and drives across a restart', async () => {
      await world.ledger.add([entry({ sourceId: 'a', turnId: 3 })], perOutputToken);
      await world.ledger.recordUnmetered(drive(4, 'unmetered'));
      world = await world.reopen();
      expect(await world.ledger.turnHasRows(3)).toBe(true);
      expect(await drives(world.ledger)).toEqual([['unmetered', 1]]);
    });

    it('an import: committed pieces stay, an aborted one is dropped whole; removals of its own rows counted', async () => {
      await world.ledger.add([entry({ sourceId: 'before' })], perOutputToken);
      const first = await world.ledger.beginImport({ commitEveryMs: 60_000 });
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
      expect(await totalRows(world.ledger)).toBe(3);
      expect((await world.ledger.report({ ...ALL_TIME, by: 'day' })).total.usage.outputTokens).toBe(15);

      const second = await world.ledger.beginImport({ commitEveryMs: 60_000 });
      await second.write({ add: [entry({ sourceId: 'c' })], correct: [], remove: ['a'] }, perOutputToken);
      await second.finish();
      world = await world.reopen();
      expect(await totalRows(world.ledger)).toBe(3);
    });

    it('reports groups in key order and drives newest first', async () => {
      await world.ledger.add(
        [
          entry({ sourceId: 'x', at: '2026-03-02T00:00:00.000Z' }),
          entry({ sourceId: 'y', at: '2026-03-01T00:00:00.000Z' }),
        ],
        perOutputToken,
      );
      await world.ledger.recordUnmetered({ ...drive(1, 'older'), at: '2026-03-01T00:00:00.000Z' });
      await world.ledger.recordUnmetered({ ...drive(2, 'newer'), at: '2026-03-02T00:00:00.000Z' });
      const report = await world.ledger.report({ ...ALL_TIME, by: 'day' });
      expect(report.groups.map((g) => g.key)).toEqual(['2026-03-01', '2026-03-02']);
      expect(report.notIncluded.unmetered.map((u) => u.reason)).toEqual(['newer', 'older']);
    });
  });
}
