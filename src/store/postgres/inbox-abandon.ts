/**
 * What recovery after a host's death (abandon.ts) does to the inbox, on the caller's transaction:
 * the work item's running deliveries read (locked), then each settled as recovery decided.
 */
import { pgText } from './inbox-accept.js';
import { notifyInbox } from './inbox-notify.js';
import type { Queryable } from './pg.js';

export interface RunningDelivery {
  id: string;
  /** The turn its last settled attempt recorded (a newer turn is of the attempt now running). */
  turnId: number | null;
}

/** The work item's running deliveries, in line order, locked until the caller's transaction ends. */
export async function runningDeliveries(q: Queryable, workItem: string): Promise<RunningDelivery[]> {
  const rows = await q.rows<{ id: string; turn_id: number | null }>(
    `SELECT id, turn_id FROM deliveries WHERE work_item = $1 AND status = 'running' ORDER BY seq FOR UPDATE`,
    [workItem],
  );
  return rows.map((r) => ({ id: r.id, turnId: r.turn_id }));
}

export interface DeliverySettlement {
  id: string;
  /** `queued`: back in its place in line (it never ran); else settled by its turn. */
  status: 'done' | 'failed' | 'queued';
  turnId: number | null;
  error: string | null;
}

/**
 * Settle running deliveries (each only while still running); the work item is notified when any
 * went back in line. Returns the ids changed.
 */
export async function settleRunning(
  q: Queryable,
  settlements: readonly DeliverySettlement[],
  at: string,
  scrub: (text: string) => string,
): Promise<string[]> {
  const changed: string[] = [];
  const wake: Array<string | null> = [];
  for (const s of settlements) {
    const row = await q.row<{ work_item: string | null }>(
      `UPDATE deliveries SET status = $2, turn_id = COALESCE($3::bigint, turn_id), error = $4, updated_at = $5
        WHERE id = $1 AND status = 'running' RETURNING work_item`,
      [s.id, s.status, s.turnId, s.error === null ? null : pgText(scrub(s.error)), at],
    );
    if (!row) continue;
    changed.push(s.id);
    if (s.status === 'queued') wake.push(row.work_item);
  }
  await notifyInbox(q, wake);
  return changed;
}
