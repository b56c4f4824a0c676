/**
 * The StatusStore contract (what was said on GitHub per delivery, issue 18): tracking is idempotent
 * and only for a delivery the inbox holds; each field written alone, an empty patch and an unknown
 * delivery change nothing; final rows leave `unfinished`, which lists the rest oldest first (ties by
 * delivery id) up to its limit; an error is scrubbed, then bounded; GitHub's large ids round-trip;
 * rows are seen by another handle and kept across a restart.
 */
import { describe, expect, it } from 'vitest';
import type { StatusRow } from '../../../src/core/ports/github-status.js';
import { type StoreFactory, type StoreHandle, useStore } from './factory.js';
import { CANARY, delivery, outcome, routed, scrubCanary, workItem } from './fixtures.js';

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

export function githubStatusContract(factory: StoreFactory): void {
  describe(`StatusStore contract (${factory.name})`, () => {
    // The suite's clock: each test sets it before the writes whose instants it checks.
    let clock = T0;
    const { store, restart } = useStore(factory, { scrub: scrubCanary, now: () => new Date(clock) });

    /** Deliveries in the inbox (the status key references them), each of a work item of its own. */
    async function accepted(...ids: string[]): Promise<string[]> {
      const items = ids.map(() => workItem());
      await store().inbox.acceptMany(ids.map((id, i) => delivery(id, routed('start', items[i] as string))));
      return items;
    }

    const fresh = (deliveryId: string, item: string, at: string): StatusRow => ({
      deliveryId,
      workItem: item,
      reacted: false,
      commentId: null,
      checkRunId: null,
      checkSha: null,
      phase: null,
      digest: null,
      final: false,
      lastError: null,
      createdAt: at,
      updatedAt: at,
    });

    it('tracks a delivery once: tracking it again returns the row as it is', async () => {
      clock = T0;
      const [item] = await accepted('d-1');
      expect(await store().githubStatus.get('d-1')).toBeUndefined();
      const first = await store().githubStatus.track('d-1', item as string);
      expect(first).toEqual(fresh('d-1', item as string, iso(T0)));
      clock = T0 + 1000;
      await store().githubStatus.update('d-1', { reacted: true, commentId: 42 });
      clock = T0 + 2000;
      const again = await store().githubStatus.track('d-1', 'github:octo/other#9');
      expect(again).toEqual({
        ...fresh('d-1', item as string, iso(T0)),
        reacted: true,
        commentId: 42,
        updatedAt: iso(T0 + 1000),
      });
      expect(await store().githubStatus.get('d-1')).toEqual(again);
      const both = await Promise.all([
        store().githubStatus.track('d-1', item as string),
        store().githubStatus.track('d-1', item as string),
      ]);
      expect(both).toEqual([again, again]);
    });

    it('tracks only a delivery the inbox holds', async () => {
      expect(await outcome(() => store().githubStatus.track('no-such-delivery', workItem()))).toBe(
        'store-failed',
      );
      expect(await store().githubStatus.get('no-such-delivery')).toBeUndefined();
    });

    it('writes each field alone, leaving the others; null clears what may be null', async () => {
      clock = T0;
      const [item] = await accepted('d-f');
      const status = store().githubStatus;
      let expected = await status.track('d-f', item as string);
      const steps: Array<Partial<StatusRow>> = [
        { reacted: true },
        { commentId: 1234567 },
        { checkRunId: 7654321 },
        { checkSha: 'a'.repeat(40) },
        { phase: 'queued' },
        { phase: 'running' },
        { phase: 'held' },
        { digest: 'f'.repeat(64) },
        { lastError: 'GitHub answered 502' },
        { phase: 'finished' },
        { final: true },
        { commentId: null, checkRunId: null, checkSha: null, digest: null, lastError: null },
        { reacted: false, final: false },
      ];
      for (const [i, patch] of steps.entries()) {
        clock = T0 + (i + 1) * 1000;
        await status.update('d-f', patch);
        expected = { ...expected, ...patch, updatedAt: iso(clock) };
        expect(await status.get('d-f')).toEqual(expected);
      }
    });

    it('an empty patch, and an unknown delivery, change nothing', async () => {
      clock = T0;
      const [item] = await accepted('d-e');
      const tracked = await store().githubStatus.track('d-e', item as string);
      clock = T0 + 5000;
      await store().githubStatus.update('d-e', {});
      expect(await store().githubStatus.get('d-e')).toEqual(tracked);
      await store().githubStatus.update('no-such-delivery', { final: true, lastError: 'x', commentId: 1 });
      expect(await store().githubStatus.get('no-such-delivery')).toBeUndefined();
      expect(await store().githubStatus.unfinished(10)).toEqual([tracked]);
    });

    it('lists the rows not final, oldest first (ties by delivery id), at most `limit`', async () => {
      await accepted('u-c', 'u-a', 'u-b', 'u-d', 'u-e');
      const status = store().githubStatus;
      // Tracked out of id order; u-a and u-b in the same millisecond.
      const order: Array<[string, number]> = [
        ['u-c', T0],
        ['u-b', T0 + 10],
        ['u-a', T0 + 10],
        ['u-e', T0 + 20],
        ['u-d', T0 + 30],
      ];
      for (const [id, at] of order) {
        clock = at;
        await status.track(id, `github:octo/widgets#${id}`);
      }
      const ids = (rows: StatusRow[]) => rows.map((r) => r.deliveryId);
      expect(ids(await status.unfinished(10))).toEqual(['u-c', 'u-a', 'u-b', 'u-e', 'u-d']);
      expect(ids(await status.unfinished(2))).toEqual(['u-c', 'u-a']);
      expect(await status.unfinished(0)).toEqual([]);
      await status.update('u-a', { phase: 'finished', final: true });
      await status.update('u-c', { final: true });
      // A row finished on GitHub but not final yet (its last edit failed) is still to finish.
      await status.update('u-e', { phase: 'finished', lastError: 'GitHub answered 403' });
      expect(ids(await status.unfinished(10))).toEqual(['u-b', 'u-e', 'u-d']);
      expect(ids(await status.unfinished(1))).toEqual(['u-b']);
    });

    it('keeps an error scrubbed, then bounded to 1000 characters', async () => {
      clock = T0;
      const [item] = await accepted('d-err');
      await store().githubStatus.track('d-err', item as string);
      // The secret straddles the bound: scrubbed before the cut, no part of it is kept.
      const huge = `${'x'.repeat(990)}${CANARY}${'y'.repeat(1_000_000)}`;
      await store().githubStatus.update('d-err', { lastError: huge });
      const kept = (await store().githubStatus.get('d-err'))?.lastError ?? '';
      expect(kept).toHaveLength(1000);
      expect(kept).toBe(`${'x'.repeat(990)}[redacted]`);
      expect(kept).not.toContain(CANARY.slice(0, 8));
      const after = await restart();
      const contents = await after.contents?.();
      if (contents !== undefined) expect(contents).not.toContain(CANARY);
    });

    it("keeps GitHub's large ids exactly (2^40, and up to 2^53 - 1); refuses what is not an id", async () => {
      clock = T0;
      const [item] = await accepted('d-id');
      await store().githubStatus.track('d-id', item as string);
      await store().githubStatus.update('d-id', { commentId: 2 ** 40, checkRunId: Number.MAX_SAFE_INTEGER });
      const row = await store().githubStatus.get('d-id');
      expect(row?.commentId).toBe(2 ** 40);
      expect(row?.checkRunId).toBe(Number.MAX_SAFE_INTEGER);
      for (const bad of [1.5, 0, -1, 2 ** 53, Number.NaN])
        expect(await outcome(() => store().githubStatus.update('d-id', { commentId: bad }))).toBe('internal');
      expect((await store().githubStatus.get('d-id'))?.commentId).toBe(2 ** 40);
    });

    it('rows are seen by another handle and kept across a restart', async () => {
      clock = T0;
      const [a, b] = await accepted('r-a', 'r-b');
      await store().githubStatus.track('r-a', a as string);
      await store().githubStatus.track('r-b', b as string);
      const other = await store().second();
      await other.githubStatus.update('r-a', {
        reacted: true,
        commentId: 2 ** 40 + 7,
        phase: 'running',
        digest: 'd'.repeat(64),
      });
      await other.githubStatus.update('r-b', { phase: 'finished', final: true });
      const before = await store().githubStatus.get('r-a');
      expect(before).toMatchObject({ reacted: true, commentId: 2 ** 40 + 7, phase: 'running' });
      const after: StoreHandle = await restart();
      expect(await after.githubStatus.get('r-a')).toEqual(before);
      expect((await after.githubStatus.unfinished(10)).map((r) => r.deliveryId)).toEqual(['r-a']);
      expect((await after.githubStatus.get('r-b'))?.final).toBe(true);
    });
  });
}
