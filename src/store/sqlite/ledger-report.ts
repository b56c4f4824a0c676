import type { GroupBy, ReportGroup, UnmeteredGroup, UsageReport } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';

/** The usage report's queries (read by the ledger's owner, store/sqlite/ledger.ts, for `report`). */

/** SQL for each grouping key: fixed strings only, never outside text. */
const KEY_SQL: Record<GroupBy, string> = {
  day: 'substr(at, 1, 10)',
  engine: "COALESCE(engine, '(imported)')",
  model: "COALESCE(model, '(no model)')",
  'work-item': "COALESCE(work_item, '(no work item)')",
  payer: "payer_kind || COALESCE(' ' || payer_id, '')",
  session: "COALESCE(session_id, '(no session)')",
};

interface Row {
  key: string;
  rows: number;
  turns: number;
  input: number | null;
  output: number | null;
  cache_read: number | null;
  cache_creation: number | null;
  reasoning: number | null;
  cost: number | null;
  priced: number | null;
  unpriced: number | null;
  bases: string | null;
}

const toGroup = (r: Row): ReportGroup => ({
  key: r.key,
  rows: r.rows,
  turns: r.turns,
  usage: {
    inputTokens: r.input ?? 0,
    outputTokens: r.output ?? 0,
    cacheReadTokens: r.cache_read ?? 0,
    cacheCreationTokens: r.cache_creation ?? 0,
    reasoningTokens: r.reasoning ?? 0,
  },
  // SUM over no rows is NULL: an empty group has nothing priced and nothing unpriced.
  costUsd: (r.priced ?? 0) > 0 ? (r.cost ?? 0) : null,
  unpricedRows: r.unpriced ?? 0,
  costBases: r.bases ? r.bases.split(',').sort() : [],
});

const AGGREGATE = `COUNT(*) AS rows, COUNT(DISTINCT turn_id) AS turns,
  SUM(input_tokens) AS input, SUM(output_tokens) AS output, SUM(cache_read_tokens) AS cache_read,
  SUM(cache_creation_tokens) AS cache_creation, SUM(reasoning_tokens) AS reasoning,
  SUM(cost_usd) AS cost, SUM(cost_usd IS NOT NULL) AS priced, SUM(cost_usd IS NULL) AS unpriced,
  GROUP_CONCAT(DISTINCT cost_basis) AS bases`;

/** Totals of the ledger between two instants, grouped, with what they leave out. */
export function usageReport(db: Db, filter: { since: Date; until: Date; by: GroupBy }): UsageReport {
  const since = filter.since.toISOString();
  const until = filter.until.toISOString();
  const key = KEY_SQL[filter.by];
  const groups = (
    db
      .prepare(
        `SELECT ${key} AS key, ${AGGREGATE} FROM usage_ledger WHERE at >= ? AND at < ? GROUP BY 1 ORDER BY 1`,
      )
      .all(since, until) as Row[]
  ).map(toGroup);
  const total = toGroup(
    db
      .prepare(`SELECT 'total' AS key, ${AGGREGATE} FROM usage_ledger WHERE at >= ? AND at < ?`)
      .get(since, until) as Row,
  );
  const unmetered = db
    .prepare(
      `SELECT engine, runner, reason, COUNT(*) AS count, MAX(at) AS last FROM unmetered_drives
         WHERE at >= ? AND at < ? GROUP BY engine, runner, reason ORDER BY last DESC`,
    )
    .all(since, until) as UnmeteredGroup[];
  const unpricedModels = (
    db
      .prepare(
        `SELECT DISTINCT COALESCE(model, '(no model)') AS model FROM usage_ledger
           WHERE at >= ? AND at < ? AND cost_usd IS NULL ORDER BY 1`,
      )
      .all(since, until) as { model: string }[]
  ).map((r) => r.model);
  return {
    since,
    until,
    by: filter.by,
    groups,
    total,
    notIncluded: {
      unmetered,
      unmeteredCount: unmetered.reduce((n, u) => n + u.count, 0),
      unpricedModels,
      unpricedRows: total.unpricedRows,
    },
  };
}
