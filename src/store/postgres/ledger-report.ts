/**
 * The PostgreSQL ledger's reads (for ledger.ts): the usage report and sessions' costs, grouped
 * straight from `usage_ledger` (PostgreSQL has no hourly rollup). What they give is what SQLite's
 * give for the same rows (store/sqlite/ledger-report.ts, ledger-costs.ts): the same keys, in the same
 * order (byte order: COLLATE "C", as SQLite compares text), the same dollars (costSum: the exact sum
 * rounded once, as SQLite's SUM), the totals added in JS in the same order — the keys, the assembly
 * from the grouped rows and the cost figures' folding are one copy for both (store/report-assembly.ts).
 */
import type { GroupBy, SessionCosts, UnmeteredGroup, UsageReport } from '../../core/ports/ledger.js';
import {
  addCostRows,
  type CostRow,
  costChunks,
  countsTurns,
  KEY_SQL,
  NO_MODEL,
  type ReportRow,
  reportOf,
  reportTotal,
} from '../report-assembly.js';
import { costSum } from './ledger-shared.js';
import type { Queryable } from './pg.js';

const WINDOW = 'at >= $1 AND at < $2';

const groupsSql = (by: GroupBy): string =>
  `SELECT (${KEY_SQL[by]}) COLLATE "C" AS key, COUNT(*) AS rows, COUNT(DISTINCT turn_id) AS turns,
     SUM(input_tokens) AS input, SUM(output_tokens) AS output, SUM(cache_read_tokens) AS cache_read,
     SUM(cache_creation_tokens) AS cache_creation, SUM(reasoning_tokens) AS reasoning,
     ${costSum('cost_usd')} AS cost, COUNT(cost_usd) AS priced, COUNT(*) - COUNT(cost_usd) AS unpriced,
     string_agg(DISTINCT cost_basis, ',') AS bases
   FROM usage_ledger WHERE ${WINDOW} GROUP BY 1 ORDER BY 1`;

/**
 * The unmetered drives grouped, the latest first; groups of the same latest drive in the order
 * SQLite's sort leaves them (by engine, runner and reason, NULL first).
 */
const UNMETERED = `SELECT engine, runner, reason, COUNT(*) AS count, MAX(at) AS last FROM unmetered_drives
  WHERE ${WINDOW} GROUP BY engine, runner, reason
  ORDER BY last DESC, engine COLLATE "C" NULLS FIRST, runner COLLATE "C" NULLS FIRST, reason COLLATE "C"`;

/** Totals of the ledger between two instants, grouped, with what they leave out (q: one snapshot). */
export async function usageReport(
  q: Queryable,
  filter: { since: Date; until: Date; by: GroupBy },
): Promise<UsageReport> {
  const since = filter.since.toISOString();
  const until = filter.until.toISOString();
  const rows = await q.rows<ReportRow>(groupsSql(filter.by), [since, until]);
  const turns = countsTurns(rows)
    ? ((
        await q.row<{ n: number }>(
          `SELECT COUNT(DISTINCT turn_id) AS n FROM usage_ledger WHERE turn_id IS NOT NULL AND ${WINDOW}`,
          [since, until],
        )
      )?.n ?? 0)
    : 0;
  const total = reportTotal(rows, turns);
  const unmetered = await q.rows<UnmeteredGroup>(UNMETERED, [since, until]);
  // Models without a price: looked for only when there are unpriced rows.
  const unpricedModels =
    total.unpricedRows === 0
      ? []
      : (
          await q.rows<{ model: string }>(
            `SELECT DISTINCT COALESCE(model, '${NO_MODEL}') COLLATE "C" AS model FROM usage_ledger
               WHERE ${WINDOW} AND cost_usd IS NULL ORDER BY 1`,
            [since, until],
          )
        ).map((r) => r.model);
  return reportOf({ since, until, by: filter.by }, rows, total, unmetered, unpricedModels);
}

/** One row per (session, turn), in SQLite's order: session (bytes), then turn (none first). */
const COSTS = `SELECT session_id, turn_id, COUNT(*) AS rows, ${costSum('cost_usd')} AS cost,
    COUNT(*) - COUNT(cost_usd) AS unpriced, string_agg(DISTINCT cost_basis, ',') AS bases
  FROM usage_ledger WHERE session_id = ANY($1::text[])
  GROUP BY session_id, turn_id ORDER BY session_id COLLATE "C", turn_id NULLS FIRST`;

/**
 * Each session's rows, whole and by turn; sessions without rows absent. Asked for as SQLite asks
 * (COST_IDS_PER_QUERY at a time), so the answer's order is SQLite's too.
 */
export async function sessionCosts(
  q: Queryable,
  sessionIds: readonly string[],
): Promise<Map<string, SessionCosts>> {
  const out = new Map<string, SessionCosts>();
  for (const chunk of costChunks(sessionIds)) addCostRows(out, await q.rows<CostRow>(COSTS, [chunk]));
  return out;
}
