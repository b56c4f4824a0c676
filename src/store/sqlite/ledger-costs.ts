import type { SessionCosts } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';
import { addCostRows, type CostRow, costChunks } from '../report-assembly.js';

/**
 * What sessions' ledger rows cost, by session and by turn (read by the ledger's owner,
 * store/sqlite/ledger.ts, for `sessionCosts`): the console's costs, which only the ledger knows for
 * turns metered at the wire or from transcripts. The rows are asked for COST_IDS_PER_QUERY sessions
 * at a time (SQLite allows 32766 parameters since 3.32, 999 before, and a bounded IN list keeps each
 * statement's plan a short run of index lookups), and folded as the PostgreSQL ledger folds them
 * (store/report-assembly.ts).
 */

/**
 * One row per (session, turn), rows outside any turn grouped under a NULL turn. `session_id IN (…)`
 * implies `session_id IS NOT NULL`, so the partial index usage_ledger_session (migration 8) serves it.
 * SUM over priced rows only: NULL when none is priced, which is what `costUsd` says.
 */
const groupsSql = (n: number): string =>
  `SELECT session_id, turn_id, COUNT(*) AS rows, SUM(cost_usd) AS cost, SUM(cost_usd IS NULL) AS unpriced,
     GROUP_CONCAT(DISTINCT cost_basis) AS bases
   FROM usage_ledger WHERE session_id IN (${Array(n).fill('?').join(', ')})
   GROUP BY session_id, turn_id`;

/** Each session's rows, whole and by turn; sessions without rows absent. */
export function sessionCosts(db: Db, sessionIds: readonly string[]): Map<string, SessionCosts> {
  const out = new Map<string, SessionCosts>();
  for (const chunk of costChunks(sessionIds))
    addCostRows(out, db.prepare(groupsSql(chunk.length)).all(...chunk) as CostRow[]);
  return out;
}
