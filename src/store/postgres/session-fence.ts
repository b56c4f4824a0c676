/**
 * Fencing of the session store's writes (issue 17, several hosts): a write a host makes for a work
 * item holds only while the host holds the work item's lease at the epoch it names. Two kinds:
 *
 * - By the store's `Fence` (creating a session, beginning a turn, the session's own columns a turn
 *   writes): the host and its epoch of the work item are bound as parameters and checked with
 *   `fencedBy` (the lease row share-locked to the write's commit). Without a fence the host is
 *   bound null and the condition is true: one host, as before.
 * - By the turn's own record (its end, pid, events): a turn begun under a lease carries the host and
 *   epoch it was begun under, and a write to it holds only while that lease is current. A turn with
 *   no host (a one-host store's) is never fenced.
 */
import { LoopError } from '../../core/errors.js';
import type { Fence } from '../../core/ports/hosts.js';
import { fencedBy } from './hosts.js';
import type { Queryable } from './pg.js';

/** The host and epoch bound for a fenced write of `workItem` (both null without a fence). */
export function fenceValues(fence: Fence | undefined, workItem: string): [string | null, number | null] {
  if (!fence) return [null, null];
  return [fence.host, fence.epochOf(workItem) ?? null];
}

/**
 * A write's condition: no fence (the host placeholder bound null), or the host holds the work
 * item's lease at the epoch bound (an absent epoch, bound null, fails it).
 */
export const fenceHolds = (workItem: string, host: string, epoch: string): string =>
  `(${host}::text IS NULL OR ${fencedBy(workItem, host, epoch, { lock: true })})`;

/**
 * A turn row's own fence (`t` is the alias of `turns` in the write, `host` the placeholder of the
 * writing host, bound null without a fence): no host recorded, or the host it records is the
 * writer and still holds the lease of its session's work item at the epoch it records (share-
 * locked, as `fencedBy` does). A host never writes to another host's turn.
 */
export const turnFenceHolds = (t: string, host: string): string =>
  `(${t}.host_id IS NULL OR ((${host}::text IS NULL OR ${t}.host_id = ${host}::text) AND EXISTS (
     SELECT 1 FROM leases l JOIN sessions fs ON fs.work_item = l.work_item
      WHERE fs.id = ${t}.session_id AND l.host_id = ${t}.host_id AND l.epoch = ${t}.epoch
        AND NOT l.ended AND l.expires_at > now() FOR SHARE OF l)))`;

/**
 * The host scope of recovery (`host` a placeholder): with a fence, only the turns this host ran, or
 * that were written before hosts (no host recorded); another host's turn is never judged by this
 * host's process table. Without one (bound null), every turn.
 */
export const hostScope = (t: string, host: string): string =>
  `(${host}::text IS NULL OR ${t}.host_id IS NULL OR ${t}.host_id = ${host}::text)`;

export const fencedError = (workItem: string, host: string | null, epoch: number | null) =>
  new LoopError(
    'fenced',
    `host ${host ?? '?'} does not hold the lease of ${workItem}${epoch === null ? '' : ` at epoch ${epoch}`}: nothing was written`,
    {
      hint: 'Another host owns this work item now (`the-loop hosts list`); its writes go through that host.',
    },
  );

/**
 * A write of a turn changed nothing (`changed` 0): when the turn's own fence refused it (the turn
 * records a host), tell the fence what was not written, naming the work item and the turn's epoch
 * (invariant 7: said, never silent; the fence warns once per turn and kind of write).
 */
export async function noteTurnRefused(
  q: Queryable,
  fence: Fence | undefined,
  changed: number,
  turnId: number,
  what: string,
): Promise<void> {
  if (changed > 0 || !fence?.refused) return;
  const row = await q.row<{ work_item: string; epoch: number | null; host_id: string | null }>(
    'SELECT s.work_item, t.epoch, t.host_id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id = $1',
    [turnId],
  );
  if (!row || row.host_id === null) return;
  fence.refused({
    workItem: row.work_item,
    epoch: row.epoch,
    what: `${what} of turn ${turnId} (host ${row.host_id})`,
    key: `turn ${turnId} ${what}`,
  });
}

/**
 * A write under this host's fence changed nothing (`changed` 0): when the lease of `workItem` at
 * `epoch` is not held (or no epoch is held), tell the fence what was not written; when it is held,
 * the write found nothing to change for another reason and is not a fenced write.
 */
export async function noteRefused(
  q: Queryable,
  fence: Fence | undefined,
  changed: number,
  refusal: { workItem: string; epoch: number | null; what: string; key: string },
): Promise<void> {
  if (changed > 0 || !fence?.refused) return;
  if (refusal.epoch !== null) {
    const row = await q.row<{ held: boolean }>(`SELECT ${fencedBy('$1', '$2', '$3')} AS held`, [
      refusal.workItem,
      fence.host,
      refusal.epoch,
    ]);
    if (row?.held === true) return;
  }
  fence.refused(refusal);
}
