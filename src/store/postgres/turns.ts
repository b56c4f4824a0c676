/**
 * The turn side of the PostgreSQL session store (the owner of `turns` and `turn_events`), and what
 * other stores read of turns through it.
 */
import type { Queryable } from './pg.js';

/** Turns begun since `since` (ISO) by one session, or by every session of one work item: the budgets' count. */
export async function countTurns(
  q: Queryable,
  scope: 'session' | 'work-item',
  key: string,
  since: string,
): Promise<number> {
  const which =
    scope === 'session' ? 'session_id = $1' : 'session_id IN (SELECT id FROM sessions WHERE work_item = $1)';
  const row = await q.row<{ n: number }>(
    `SELECT COUNT(*) AS n FROM turns WHERE ${which} AND started_at >= $2`,
    [key, since],
  );
  return row?.n ?? 0;
}
