/**
 * The inbox's arrivals on PostgreSQL: deliveries stored once, whichever hosts receive them at once.
 *
 * A batch first takes a transaction-scoped advisory lock on each of its delivery ids, all in one
 * statement and in one global order (by hash), then reads which ids are stored, then routes and
 * inserts the new ones in the batch's order. Another host's batch holding any of the same ids waits
 * for the first to commit, and its lookup (a new snapshot: READ COMMITTED) then finds them stored:
 * so a delivery is stored once AND routed once (`route` is never asked on a host that then loses the
 * insert). Taking the locks in one order means two batches never deadlock on each other (inserting
 * in batch order without them, [a, b] and [b, a] at once would). The insert keeps `ON CONFLICT (id)
 * DO NOTHING` all the same: a writer that skips the locks still cannot store an id twice.
 *
 * `seq` (an identity) follows insert order: a batch's rows keep its order; across hosts, arrival
 * order is the order of the inserts, close to but not exactly commit order.
 */
import type { NewDelivery, RoutedDelivery } from '../../core/ports/inbox.js';
import { type Masking, planOf, scrubJson, statusOf, storedBody } from '../sqlite/inbox-rows.js';
import type { Queryable } from './pg.js';

/** The advisory lock namespace (the first key) of delivery ids being accepted: "dlv\0". */
export const ACCEPT_LOCKS = 0x646c7600;

/**
 * Locks the ids (text[] $2) in namespace $1, in the order of their hashes: the subquery's sort is
 * the order the locks are taken in. A hash shared by two ids only serializes a little more.
 */
export const LOCK_IDS_SQL = `SELECT count(pg_advisory_xact_lock($1::int, h)) AS n
  FROM (SELECT DISTINCT hashtext(x) AS h FROM unnest($2::text[]) AS x ORDER BY h) AS locks`;

const INSERT_SQL = `INSERT INTO deliveries
  (id, source, event, action, received_at, body, status, route, work_item, reason, plan, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $5) ON CONFLICT (id) DO NOTHING`;

/**
 * Text PostgreSQL can hold: a TEXT value cannot contain U+0000 (SQLite's can), so outside text that
 * carries one (a payload's `action`, an error quoted from a process) keeps U+FFFD in its place
 * instead of failing the write.
 */
export const pgText = <T extends string | null>(text: T): T =>
  (text === null || !text.includes('\u0000') ? text : text.replaceAll('\u0000', '\uFFFD')) as T;

/** A routed result as the row holds it: the plan (outside text) scrubbed like the body. */
export function routedColumns(routed: RoutedDelivery, masking: Masking) {
  const plan = planOf(routed);
  const scrub = (text: string) => masking.scrub?.(text) ?? text;
  return {
    status: statusOf(routed.action),
    workItem: routed.workItem === undefined ? null : pgText(routed.workItem),
    reason: 'reason' in routed ? pgText(scrub(routed.reason)) : null,
    plan: plan === null ? null : scrubJson(plan, masking.scrub),
  };
}

/** Bytes for the BYTEA column: a text body (or a scrubbed one) as its UTF-8 bytes. */
function bodyBytes(d: Pick<NewDelivery, 'body' | 'bodyText'>, masking: Masking): Buffer {
  const stored = storedBody(d.body, d.bodyText, masking);
  return typeof stored === 'string' ? Buffer.from(stored, 'utf8') : stored;
}

/** Lock the batch's ids (see above), for the rest of the transaction. */
export async function lockIds(q: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length > 0) await q.row(LOCK_IDS_SQL, [ACCEPT_LOCKS, ids]);
}

/** Lock the batch's ids (see above) and answer those already stored. */
export async function lockAndFindStored(q: Queryable, ids: readonly string[]): Promise<Set<string>> {
  await lockIds(q, ids);
  const rows = await q.rows<{ id: string }>('SELECT id FROM deliveries WHERE id = ANY($1::text[])', [ids]);
  return new Set(rows.map((r) => r.id));
}

/** Insert one delivery unless its id is stored: whether this call stored it. */
export async function insertDelivery(
  q: Queryable,
  d: NewDelivery,
  at: string,
  masking: Masking,
): Promise<boolean> {
  const r = routedColumns(d.routed, masking);
  const changed = await q.run(INSERT_SQL, [
    d.id,
    d.source,
    pgText(d.event),
    pgText(d.action),
    at,
    bodyBytes(d, masking),
    r.status ?? 'queued',
    d.routed.action,
    r.workItem,
    r.reason,
    r.plan,
  ]);
  return changed === 1;
}
