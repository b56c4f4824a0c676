import type { GroupBy, ReportGroup, UnmeteredGroup, UsageReport } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';
import { NO_ENGINE, NO_MODEL } from './ledger-hours.js';
import { type HourSplit, rollupReport, usableSplit } from './ledger-report-hours.js';

/** The usage report's queries (read by the ledger's owner, store/sqlite/ledger.ts, for `report`). */

/**
 * SQL for each grouping key: fixed strings only, never outside text. The hourly rollup stores the
 * engine, model and payer keys as written here (ledger-hours.ts): change one, and a migration must
 * fill the rollup again.
 */
const KEY_SQL: Record<GroupBy, string> = {
  day: 'substr(at, 1, 10)',
  engine: `COALESCE(engine, '${NO_ENGINE}')`,
  model: `COALESCE(model, '${NO_MODEL}')`,
  'work-item': "COALESCE(work_item, '(no work item)')",
  payer: "payer_kind || COALESCE(' ' || payer_id, '')",
  session: "COALESCE(session_id, '(no session)')",
};

export interface Row {
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
  rows: Row[];
  turns(): number;
  unpricedModels(): string[];
}

/** The total of the groups (one pass over the rows), but for turns, which a day can share. */
function totalOf(groups: readonly Row[], turns: () => number): Row {
  const total: Row = {
    key: 'total',
    rows: 0,
    turns: 0,
    input: null,
    output: null,
    cache_read: null,
    cache_creation: null,
    reasoning: null,
    cost: null,
    priced: null,
    unpriced: null,
    bases: null,
  };
  const add = (a: number | null, b: number | null) => (b === null ? a : (a ?? 0) + b);
  const bases = new Set<string>();
  for (const g of groups) {
    total.rows += g.rows;
    total.input = add(total.input, g.input);
    total.output = add(total.output, g.output);
    total.cache_read = add(total.cache_read, g.cache_read);
    total.cache_creation = add(total.cache_creation, g.cache_creation);
    total.reasoning = add(total.reasoning, g.reasoning);
    total.cost = add(total.cost, g.cost);
    total.priced = add(total.priced, g.priced);
    total.unpriced = add(total.unpriced, g.unpriced);
    for (const b of g.bases?.split(',') ?? []) bases.add(b);
  }
  total.bases = bases.size > 0 ? [...bases].join(',') : null;
  if (groups.some((g) => g.turns > 0)) total.turns = turns();
  return total;
}

/** What the report reads from the ledger alone: the groups, and the turns and unpriced models of all. */
function ledgerReport(db: Db, by: GroupBy, since: string, until: string): ReportParts {
  const where = windowClause(db, since, until);
  const rows = db
    .prepare(
      `SELECT ${KEY_SQL[by]} AS key, ${AGGREGATE} FROM usage_ledger WHERE ${where} GROUP BY 1 ORDER BY 1`,
    )
    .all(since, until) as Row[];
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
  const groups = rows.map(toGroup);
  const total = toGroup(totalOf(rows, parts.turns));
  const unmetered = db
    .prepare(
      `SELECT engine, runner, reason, COUNT(*) AS count, MAX(at) AS last FROM unmetered_drives
         WHERE at >= ? AND at < ? GROUP BY engine, runner, reason ORDER BY last DESC`,
    )
    .all(since, until) as UnmeteredGroup[];
  // Models without a price: looked for only when there are unpriced rows.
  const unpricedModels = total.unpricedRows === 0 ? [] : parts.unpricedModels();
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
