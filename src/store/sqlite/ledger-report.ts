import type { GroupBy, UnmeteredGroup, UsageReport } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';
import { countsTurns, KEY_SQL, NO_MODEL, type ReportRow, reportOf, reportTotal } from '../report-assembly.js';
import { type HourSplit, rollupReport, usableSplit } from './ledger-report-hours.js';

/**
 * The usage report's queries (read by the ledger's owner, store/sqlite/ledger.ts, for `report`). The
 * grouping keys and the report's assembly from the grouped rows are the PostgreSQL ledger's too
 * (store/report-assembly.ts).
 */

const AGGREGATE = `COUNT(*) AS rows, COUNT(DISTINCT turn_id) AS turns,
  SUM(input_tokens) AS input, SUM(output_tokens) AS output, SUM(cache_read_tokens) AS cache_read,
  SUM(cache_creation_tokens) AS cache_creation, SUM(reasoning_tokens) AS reasoning,
  SUM(cost_usd) AS cost, SUM(cost_usd IS NOT NULL) AS priced, SUM(cost_usd IS NULL) AS unpriced,
  GROUP_CONCAT(DISTINCT cost_basis) AS bases`;

/**
 * The window's rows in one pass: the `at` index when the window leaves rows out, a plain scan of
 * the table when it holds them all (`--since 3650d` after a scan): walking the whole index and
 * looking each row up costs half as much again as reading the table in order.
 */
function windowClause(db: Db, since: string, until: string): string {
  const { lo, hi } = db
    .prepare('SELECT (SELECT MIN(at) FROM usage_ledger) AS lo, (SELECT MAX(at) FROM usage_ledger) AS hi')
    .get() as { lo: string | null; hi: string | null };
  const all = lo === null || hi === null || (lo >= since && hi < until);
  return all ? '+at >= ? AND +at < ?' : 'at >= ? AND at < ?';
}

/** A report's groups, and how to count its turns and name its unpriced models (asked when needed). */
export interface ReportParts {
  rows: ReportRow[];
  turns(): number;
  unpricedModels(): string[];
}

/** What the report reads from the ledger alone: the groups, and the turns and unpriced models of all. */
function ledgerReport(db: Db, by: GroupBy, since: string, until: string): ReportParts {
  const where = windowClause(db, since, until);
  const rows = db
    .prepare(
      `SELECT ${KEY_SQL[by]} AS key, ${AGGREGATE} FROM usage_ledger WHERE ${where} GROUP BY 1 ORDER BY 1`,
    )
    .all(since, until) as ReportRow[];
  return {
    rows,
    turns: () =>
      (
        db
          .prepare(
            `SELECT COUNT(DISTINCT turn_id) AS n FROM usage_ledger WHERE turn_id IS NOT NULL AND ${where}`,
          )
          .get(since, until) as { n: number }
      ).n,
    unpricedModels: () =>
      (
        db
          .prepare(
            `SELECT DISTINCT COALESCE(model, '${NO_MODEL}') AS model FROM usage_ledger
               WHERE ${where} AND cost_usd IS NULL ORDER BY 1`,
          )
          .all(since, until) as { model: string }[]
      ).map((r) => r.model),
  };
}

/**
 * Totals of the ledger between two instants, grouped, with what they leave out: from the hourly
 * rollup for the window's whole hours and the ledger's rows for the rest (ledger-report-hours.ts),
 * or, by work item or session, from the ledger's rows (`rollup: false`: always, for comparing).
 */
export function usageReport(
  db: Db,
  filter: { since: Date; until: Date; by: GroupBy },
  options: { rollup?: boolean } = {},
): UsageReport {
  const since = filter.since.toISOString();
  const until = filter.until.toISOString();
  const split: HourSplit | undefined =
    options.rollup === false ? undefined : usableSplit(db, filter.by, since, until);
  const parts = split
    ? rollupReport(db, filter.by, KEY_SQL[filter.by], split)
    : ledgerReport(db, filter.by, since, until);
  const { rows } = parts;
  const total = reportTotal(rows, countsTurns(rows) ? parts.turns() : 0);
  const unmetered = db
    .prepare(
      `SELECT engine, runner, reason, COUNT(*) AS count, MAX(at) AS last FROM unmetered_drives
         WHERE at >= ? AND at < ? GROUP BY engine, runner, reason ORDER BY last DESC`,
    )
    .all(since, until) as UnmeteredGroup[];
  // Models without a price: looked for only when there are unpriced rows.
  const unpricedModels = total.unpricedRows === 0 ? [] : parts.unpricedModels();
  return reportOf({ since, until, by: filter.by }, rows, total, unmetered, unpricedModels);
}
