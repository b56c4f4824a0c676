import type { CostFigure, SessionCosts } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';

/**
 * What sessions' ledger rows cost, by session and by turn (read by the ledger's owner,
 * store/sqlite/ledger.ts, for `sessionCosts`): the console's costs, which only the ledger knows for
 * turns metered at the wire or from transcripts.
 */

/**
 * Ids per query: SQLite allows 32766 parameters since 3.32 (999 before), and a bounded IN list
 * keeps each statement's plan a short run of index lookups.
 */
export const COST_IDS_PER_QUERY = 500;

interface Row {
  session_id: string;
  turn_id: number | null;
  rows: number;
  cost: number | null;
  unpriced: number;
  bases: string | null;
}

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

const figureOf = (r: Row): CostFigure => ({
  costUsd: r.cost,
  rows: r.rows,
  unpricedRows: r.unpriced,
  bases: r.bases ? r.bases.split(',').sort() : [],
});

/** Two figures as one: a priced sum stays null only while neither side has a price. */
function addFigures(a: CostFigure, b: CostFigure): CostFigure {
  return {
    costUsd: a.costUsd === null && b.costUsd === null ? null : (a.costUsd ?? 0) + (b.costUsd ?? 0),
    rows: a.rows + b.rows,
    unpricedRows: a.unpricedRows + b.unpricedRows,
    bases: [...new Set([...a.bases, ...b.bases])].sort(),
  };
}

const EMPTY: CostFigure = { costUsd: null, rows: 0, unpricedRows: 0, bases: [] };

/** Each session's rows, whole and by turn; sessions without rows absent. */
export function sessionCosts(db: Db, sessionIds: readonly string[]): Map<string, SessionCosts> {
  const out = new Map<string, SessionCosts>();
  const ids = [...new Set(sessionIds)];
  for (let i = 0; i < ids.length; i += COST_IDS_PER_QUERY) {
    const chunk = ids.slice(i, i + COST_IDS_PER_QUERY);
    for (const r of db.prepare(groupsSql(chunk.length)).all(...chunk) as Row[]) {
      const costs = out.get(r.session_id) ?? { total: EMPTY, turns: new Map<number, CostFigure>() };
      const figure = figureOf(r);
      costs.total = addFigures(costs.total, figure);
      if (r.turn_id !== null) costs.turns.set(r.turn_id, figure);
      out.set(r.session_id, costs);
    }
  }
  return out;
}
