/**
 * The DriveAuditStore contract (the terminal connector's audit): rows listed newest first (of one
 * instant, the last recorded first), bounded by `limit`, `since` (inclusive) and `until` (exclusive),
 * filtered by operator; counted per operator; every text scrubbed before it is kept; seen by another
 * handle and across a restart.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { DriveRecord } from '../../../src/core/ports/drives.js';
import { type StoreFactory, useStore } from './factory.js';
import { CANARY, scrubCanary } from './fixtures.js';

const at = (minute: number) => new Date(Date.UTC(2026, 2, 1, 10, minute)).toISOString();

const drive = (minute: number, extra: Partial<DriveRecord> = {}): DriveRecord => ({
  at: at(minute),
  operator: 'ops',
  connection: 'c-1',
  tool: 'send_input',
  backend: 'tmux',
  targetId: '%3',
  targetName: 'loop-a',
  scope: 'write',
  outcome: 'ok',
  code: null,
  payloadSha256: createHash('sha256').update(`payload ${minute}`).digest('hex'),
  payloadBytes: 12,
  detail: null,
  workItem: null,
  ...extra,
});

export function drivesContract(factory: StoreFactory): void {
  describe(`DriveAuditStore contract (${factory.name})`, () => {
    const { store, restart } = useStore(factory, { scrub: scrubCanary });

    it('keeps what it is given and lists it newest first, the last recorded first within an instant', async () => {
      const drives = store().drives;
      const ids = [
        await drives.record(drive(1)),
        await drives.record(
          drive(3, { tool: 'run_command', outcome: 'error', code: 'E_TIMEOUT', detail: 'timed out' }),
        ),
        await drives.record(
          drive(2, { tool: 'list_terminals', backend: null, targetId: null, targetName: null }),
        ),
        await drives.record(drive(3, { tool: 'close_terminal', outcome: 'refused', code: 'E_SCOPE' })),
      ];
      expect(new Set(ids).size).toBe(4);
      const listed = await drives.list({ limit: 10 });
      expect(listed.map((d) => d.tool)).toEqual([
        'close_terminal',
        'run_command',
        'list_terminals',
        'send_input',
      ]);
      expect(listed[1]).toEqual({
        ...drive(3, { tool: 'run_command', outcome: 'error', code: 'E_TIMEOUT', detail: 'timed out' }),
        id: ids[1],
      });
      expect(listed[2]).toMatchObject({ backend: null, targetId: null, targetName: null });
    });

    it('bounds by limit, since (inclusive), until (exclusive) and operator', async () => {
      const drives = store().drives;
      for (let m = 0; m < 10; m++) await drives.record(drive(m, { operator: m % 2 === 0 ? 'even' : 'odd' }));
      expect((await drives.list({ limit: 3 })).map((d) => d.at)).toEqual([at(9), at(8), at(7)]);
      expect(await drives.list({ limit: 0 })).toEqual([]);
      expect((await drives.list({ since: at(7), limit: 100 })).map((d) => d.at)).toEqual([
        at(9),
        at(8),
        at(7),
      ]);
      expect((await drives.list({ until: at(2), limit: 100 })).map((d) => d.at)).toEqual([at(1), at(0)]);
      expect((await drives.list({ since: at(3), until: at(6), limit: 100 })).map((d) => d.at)).toEqual([
        at(5),
        at(4),
        at(3),
      ]);
      const odd = await drives.list({ operator: 'odd', since: at(4), limit: 100 });
      expect(odd.map((d) => d.at)).toEqual([at(9), at(7), at(5)]);
      expect(await drives.list({ operator: 'nobody', limit: 100 })).toEqual([]);
    });

    it('counts calls and drives (writing calls not refused) per operator, with the newest of each', async () => {
      expect(await store().drives.byOperator()).toEqual([]);
      await store().drives.record(drive(5, { operator: 'b' }));
      await store().drives.record(drive(1, { operator: 'a', tool: 'read_terminal', scope: 'read' }));
      await store().drives.record(drive(7, { operator: 'b', outcome: 'refused', code: 'E_SCOPE' }));
      await store().drives.record(
        drive(6, { operator: 'b', tool: 'close_terminal', scope: 'destroy', outcome: 'error' }),
      );
      expect(await store().drives.byOperator()).toEqual([
        { operator: 'a', calls: 1, drives: 0, lastAt: at(1), lastDriveAt: null },
        { operator: 'b', calls: 3, drives: 2, lastAt: at(7), lastDriveAt: at(6) },
      ]);
    });

    it('scrubs every text before it is kept', async () => {
      await store().drives.record(
        drive(1, {
          connection: `c ${CANARY}`,
          targetId: `%${CANARY}`,
          targetName: `loop-${CANARY}`,
          code: CANARY,
          detail: `exit 1: ${CANARY}`,
          workItem: CANARY,
        }),
      );
      const after = await restart();
      const [row] = await after.drives.list({ limit: 1 });
      expect(JSON.stringify(row)).not.toContain(CANARY);
      expect(row).toMatchObject({ targetName: 'loop-[redacted]', detail: 'exit 1: [redacted]' });
      const contents = await after.contents?.();
      if (contents !== undefined) expect(contents).not.toContain(CANARY);
    });

    it('bounds long texts (after scrubbing)', async () => {
      await store().drives.record(
        drive(1, { detail: `${'x'.repeat(10_000)}${CANARY}`, targetName: 'n'.repeat(5000) }),
      );
      const [row] = await store().drives.list({ limit: 1 });
      expect(row?.detail?.length).toBeLessThanOrEqual(2000);
      expect(row?.targetName?.length).toBeLessThanOrEqual(500);
    });

    it('rows are seen by another handle and kept across a restart', async () => {
      await store().drives.record(drive(1));
      const other = await store().second();
      await other.drives.record(drive(2, { operator: 'other' }));
      expect((await store().drives.list({ limit: 10 })).map((d) => d.operator)).toEqual(['other', 'ops']);
      const after = await restart();
      expect((await after.drives.list({ limit: 10 })).map((d) => d.at)).toEqual([at(2), at(1)]);
      await after.drives.record(drive(3));
      expect(await after.drives.byOperator()).toEqual([
        { operator: 'ops', calls: 2, drives: 2, lastAt: at(3), lastDriveAt: at(3) },
        { operator: 'other', calls: 1, drives: 1, lastAt: at(2), lastDriveAt: at(2) },
      ]);
    });
  });
}
