/**
 * One dispatch pass's writes on PostgreSQL (`Inbox.applyClaims`), safe with several hosts
 * dispatching at once.
 *
 * A claim is won only while its delivery is queued and first in its work item's line: no other
 * delivery of the work item is running, and none queued before it. That is a read (the rest of the
 * line) then a write (this row), and under READ COMMITTED the row lock of the UPDATE does not cover
 * the read: two hosts claiming two deliveries of one work item at once could each read the line as
 * it was before the other's uncommitted claim. So claimers are serialized per work item with a
 * transaction-scoped advisory lock on the work item, taken before any write of the pass:
 *
 * - Only claimers take these locks, and a claimer takes all of its pass's in one statement, in one
 *   global order (by hash): two passes never deadlock on them (and a pass holds no row lock yet
 *   while it waits, so none deadlocks on a row either).
 * - The claim UPDATE runs after the lock is granted; READ COMMITTED takes its snapshot per
 *   statement, so it sees every claim another host committed before releasing the lock: the second
 *   claimer of a work item finds the first's delivery running (or its own no longer queued) and
 *   wins nothing.
 * - The locks are keyed by the work item both as the claim names it and as the row holds it, so a
 *   claim naming the wrong work item still locks the line its row is in.
 *
 * Why not the alternatives: `SELECT … FOR UPDATE` of the line locks only the rows that are queued or
 * running when it reads, not one put back in the line meanwhile; SERIALIZABLE would abort and
 * re-run whole passes on predicate-lock conflicts between unrelated work items sharing index pages.
 * Writers other than claimers (accept, retry, requeue, finish) only ever put a delivery after the
 * claim in a serial order (a retry committed after the claim's snapshot is a retry made after it),
 * which the line allows, as SQLite's one writer at a time does.
 *
 * On a fenced host (several hosts, issue 17), a claim is won only while the host holds the lease of
 * the claim's work item at its epoch (`fencedBy`, the lease row share-locked to commit: a take-over
 * waits for the claim, and a claim that waited for a take-over finds the new epoch and wins nothing).
 */
import type { Fence } from '../../core/ports/hosts.js';
import type { Claim, ClaimWrites } from '../../core/ports/inbox.js';
import { fencedBy } from './hosts.js';
import { pgText } from './inbox-accept.js';
import type { Queryable } from './pg.js';
import { noteRefused } from './session-fence.js';

/** The advisory lock namespace (the first key) of work items being claimed: "clm\0". */
export const CLAIM_LOCKS = 0x636c6d00;

/** The claims' work items, as named and as stored, locked in the order of their hashes. */
const LOCK_LINES_SQL = `SELECT count(pg_advisory_xact_lock($1::int, h)) AS n
  FROM (SELECT DISTINCT hashtext(w) AS h FROM (
      SELECT unnest($2::text[]) AS w
      UNION SELECT work_item FROM deliveries WHERE id = ANY($3::text[]) AND work_item IS NOT NULL) AS items
    ORDER BY h) AS locks`;

/**
 * Queued → running while first in its work item's line (served by `deliveries_work_item`), and, on
 * a fenced host (host $3 not null), while the host holds the lease of the work item the row is in
 * at its epoch $5 (the work item the claim names, $4).
 */
const CLAIM_SQL = `UPDATE deliveries SET status = 'running', attempts = attempts + 1, updated_at = $1
  WHERE id = $2 AND status = 'queued' AND NOT EXISTS (
    SELECT 1 FROM deliveries e WHERE e.work_item = deliveries.work_item AND e.status IN ('queued', 'running')
      AND e.seq <> deliveries.seq AND (e.status = 'running' OR e.seq < deliveries.seq))
    AND ($3::text IS NULL OR (deliveries.work_item = $4::text AND ${fencedBy('$4', '$3', '$5', { lock: true })}))`;

const HOLD_SQL = `UPDATE deliveries SET held_reason = $1::text, updated_at = $2
  WHERE id = $3 AND status = 'queued' AND held_reason IS DISTINCT FROM $1::text`;

const IGNORE_SQL = `UPDATE deliveries SET route = 'ignore', reason = $1, held_reason = NULL, status = 'ignored',
  updated_at = $2 WHERE id = $3 AND status = 'queued'`;

/**
 * Lock the lines of these work items (as claims do) until the transaction ends. Arrivals take it
 * before they insert: a delivery's `seq` is given when it is inserted but seen when it commits, so
 * without it a later delivery committed first could be claimed while an earlier one of its work
 * item is still in flight; with it, each line's seq order is its commit order.
 */
export async function lockLines(
  q: Queryable,
  workItems: ReadonlyArray<string | null | undefined>,
): Promise<void> {
  const items = [...new Set(workItems.filter((w): w is string => typeof w === 'string'))];
  if (items.length > 0) await q.row(LOCK_LINES_SQL, [CLAIM_LOCKS, items, []]);
}

/** The pass's writes in one transaction (the caller's): the claims won, in the order asked. */
export async function applyClaimWrites(
  q: Queryable,
  writes: ClaimWrites,
  at: string,
  scrub: (text: string) => string,
  fence?: Fence,
): Promise<Claim[]> {
  if (writes.claims.length > 0) {
    await q.row(LOCK_LINES_SQL, [
      CLAIM_LOCKS,
      writes.claims.map((c) => c.workItem),
      writes.claims.map((c) => c.deliveryId),
    ]);
  }
  // A fenced pass share-locks the leases of all its claims at once, in work-item order (the order
  // a heartbeat renews them in): locking them claim by claim, in the pass's order, could wait on
  // a renewal in a cycle.
  if (fence && writes.claims.length > 1)
    await q.rows(
      `SELECT work_item FROM leases WHERE work_item = ANY($1::text[]) AND host_id = $2::text
        ORDER BY work_item FOR SHARE`,
      [writes.claims.map((c) => c.workItem), fence.host],
    );
  for (const h of writes.held) {
    const reason = h.reason === null ? null : pgText(scrub(h.reason));
    await q.run(HOLD_SQL, [reason, at, h.deliveryId]);
  }
  for (const i of writes.ignored) await q.run(IGNORE_SQL, [pgText(scrub(i.reason)), at, i.deliveryId]);
  const won: Claim[] = [];
  for (const c of writes.claims) {
    const epoch = fence?.epochOf(c.workItem) ?? null;
    const fenced = fence ? [fence.host, c.workItem, epoch] : [null, null, null];
    const changed = await q.run(CLAIM_SQL, [at, c.deliveryId, ...fenced]);
    if (changed === 1) won.push(c);
    // Not won: by the fence (said once per work item and epoch), or by its line (not a refusal).
    else
      await noteRefused(q, fence, changed, {
        workItem: c.workItem,
        epoch,
        what: `the claim of delivery ${c.deliveryId}`,
        key: `claim ${c.workItem} ${epoch ?? 'none'}`,
      });
  }
  return won;
}
