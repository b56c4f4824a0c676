/**
 * The ledger's writes and sums other PostgreSQL stores make through it (the ledger owns
 * `usage_ledger` and `unmetered_drives`): the session store records a lost turn's drive in its own
 * transaction, the budgets read a session's or a work item's sums.
 */
import type { UnmeteredDrive } from '../../core/ports/ledger.js';
import type { Queryable } from './pg.js';

/** A turn nothing measured, in the unmetered drives (once per turn), on the caller's connection. */
export async function insertUnmeteredDrive(q: Queryable, d: UnmeteredDrive): Promise<void> {
  await q.run(
    `INSERT INTO unmetered_drives (at, session_id, work_item, turn_id, engine, runner, reason)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (turn_id) DO NOTHING`,
    [d.at, d.sessionId, d.workItem, d.turnId, d.engine, d.runner, d.reason],
  );
}

/** What a session's (or a work item's) rows add up to: all tokens, and the priced rows' dollars. */
export async function ledgerSums(
  q: Queryable,
  scope: 'session' | 'work-item',
  key: string,
): Promise<{ tokens: number; usd: number }> {
  const column = scope === 'session' ? 'session_id' : 'work_item';
  const row = await q.row<{ tokens: number; usd: number }>(
    `SELECT COALESCE(SUM(input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens + reasoning_tokens), 0) AS tokens,
       COALESCE(SUM(cost_usd), 0)::float8 AS usd
     FROM usage_ledger WHERE ${column} = $1`,
    [key],
  );
  return row ?? { tokens: 0, usd: 0 };
}
