import type { GroupBy } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';
import type { ReportRow } from '../report-assembly.js';
import { NO_MODEL, NO_TURN, pendingHours } from './ledger-hours.js';
import type { ReportParts } from './ledger-report.js';

/**
 * The usage report from the hourly rollup (ledger-hours.ts; read by ledger-report.ts): the window's
 * whole hours from `usage_hours`, the part of an hour at each of its ends from the ledger's rows.
 */

/** The rollup's column for each key it has; by work item and by session the ledger is read. */
const HOUR_KEY: Partial<Record<GroupBy, string>> = {
  day: 'substr(hour, 1, 10)',
  engine: 'engine',
  model: 'model',
  payer: 'payer',
};

/** The window cut at its whole hours: rows `since <= at < from` and `to <= at < until` are read. */
export interface HourSplit {
  since: string;
  until: string;
  /** The first and the end of the whole hours (13 characters: `2026-12-06T19`). */
  from: string;
  to: string;
}

/**
 * Where the rollup can answer: `from` is the hour after the one `since` is in, `to` the hour `until`
 * is in. For 13-character bounds, a row's hour (its `at`'s first 13 characters) is at or after a bound
 * exactly when its `at` is, so the three parts hold each row of the window once. Undefined when the
 * key is not in the rollup, or the window holds no whole hour.
 */
export function hourSplit(by: GroupBy, since: string, until: string): HourSplit | undefined {
  if (!HOUR_KEY[by]) return undefined;
  const start = new Date(since);
  start.setUTCMinutes(0, 0, 0);
  const from = new Date(start.getTime() + 3_600_000).toISOString().slice(0, 13);
  const to = until.slice(0, 13);
  if (from.length !== 13 || to.length !== 13) return undefined;
  return since <= from && from < to && to <= until ? { since, until, from, to } : undefined;
}

/**
 * The split, when the rollup holds every row of its whole hours: an hour changed by a writer that does
 * not write the rollup (pendingHours) in the window, and the report reads the ledger alone.
 */
export function usableSplit(db: Db, by: GroupBy, since: string, until: string): HourSplit | undefined {
  const split = hourSplit(by, since, until);
  if (!split) return undefined;
  for (const h of pendingHours(db)) {
    if (!/^[\x20-\x7e]*$/.test(h) || (h >= split.from && h < split.to)) return undefined;
  }
  return split;
}

const HOURS = 'FROM usage_hours WHERE hour >= @from AND hour < @to';
const EDGES = ['at >= @since AND at < @from', 'at >= @to AND at < @until'];

/**
 * The rows of the window as parts: the rollup's buckets, their dollars' rounding errors as rows of
 * their own (SUM adds each to its bucket's dollars as SQLite adds a row's), and the edges' rows.
 */
function partsSql(hourKey: string, ledgerKey: string): string {
  const edges = EDGES.map(
    (where) => `SELECT ${ledgerKey}, 1, turn_id, input_tokens, output_tokens, cache_read_tokens,
      cache_creation_tokens, reasoning_tokens, cost_usd, cost_usd IS NOT NULL, cost_basis
      FROM usage_ledger WHERE ${where}`,
  );
  return [
    `SELECT ${hourKey} AS key, row_count AS n, NULLIF(turn_id, ${NO_TURN}) AS turn, input, output, cache_read,
      cache_creation, reasoning, cost, priced, NULLIF(basis, '') AS basis ${HOURS}`,
    `SELECT ${hourKey}, 0, NULL, 0, 0, 0, 0, 0, cost_err, 0, NULL ${HOURS} AND cost_err <> 0`,
    ...edges,
  ].join('\nUNION ALL ');
}

/** The groups as the ledger's own aggregate gives them (ledger-report.ts's AGGREGATE). */
const GROUPS = (parts: string) => `SELECT key, SUM(n) AS rows, COUNT(DISTINCT turn) AS turns,
  SUM(input) AS input, SUM(output) AS output, SUM(cache_read) AS cache_read,
  SUM(cache_creation) AS cache_creation, SUM(reasoning) AS reasoning,
  CASE WHEN SUM(priced) > 0 THEN SUM(cost) END AS cost, SUM(priced) AS priced,
  SUM(n) - SUM(priced) AS unpriced, GROUP_CONCAT(DISTINCT basis) AS bases
  FROM (${parts}) GROUP BY 1 ORDER BY 1`;

export function rollupReport(db: Db, by: GroupBy, ledgerKey: string, split: HourSplit): ReportParts {
  const hourKey = HOUR_KEY[by] as string;
  return {
    rows: db.prepare(GROUPS(partsSql(hourKey, ledgerKey))).all(split) as ReportRow[],
    turns: () =>
      (
        db
          .prepare(
            `SELECT COUNT(DISTINCT turn) AS n FROM (SELECT NULLIF(turn_id, ${NO_TURN}) AS turn ${HOURS}
             ${EDGES.map((w) => `UNION ALL SELECT turn_id FROM usage_ledger WHERE ${w}`).join(' ')})`,
          )
          .get(split) as { n: number }
      ).n,
    unpricedModels: () =>
      (
        db
          .prepare(
            `SELECT DISTINCT model FROM (SELECT model ${HOURS} AND priced < row_count
             ${EDGES.map((w) => `UNION ALL SELECT COALESCE(model, '${NO_MODEL}') FROM usage_ledger WHERE ${w} AND cost_usd IS NULL`).join(' ')})
             ORDER BY 1`,
          )
          .all(split) as { model: string }[]
      ).map((r) => r.model),
  };
}
