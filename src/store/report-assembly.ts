import type {
  CostFigure,
  GroupBy,
  ReportGroup,
  SessionCosts,
  UnmeteredGroup,
  UsageReport,
} from '../core/ports/ledger.js';

/**
 * The usage report and sessions' costs assembled from grouped rows, as both ledgers give them
 * (store/sqlite/ledger-report.ts and ledger-costs.ts, store/postgres/ledger-report.ts): the grouping
 * keys, a group from its row, the total added in JS in the groups' order, the report itself, and
 * each session's cost figures folded from its (session, turn) rows. The SQL that groups the rows is
 * each store's own.
 */

/** What the report shows for a row without an engine, a model (SQLite's hourly rollup stores these too). */
export const NO_ENGINE = '(imported)';
export const NO_MODEL = '(no model)';

/**
 * SQL for each grouping key: fixed strings only, never outside text. SQLite's hourly rollup stores the
 * engine, model and payer keys as written here (store/sqlite/ledger-hours.ts): change one, and a
 * migration must fill the rollup again.
 */
export const KEY_SQL: Record<GroupBy, string> = {
  day: 'substr(at, 1, 10)',
  engine: `COALESCE(engine, '${NO_ENGINE}')`,
  model: `COALESCE(model, '${NO_MODEL}')`,
  'work-item': "COALESCE(work_item, '(no work item)')",
  payer: "payer_kind || COALESCE(' ' || payer_id, '')",
  session: "COALESCE(session_id, '(no session)')",
};

/** A group's row as the stores' aggregates give it (SUM over no rows is NULL). */
export interface ReportRow {
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

const toGroup = (r: ReportRow): ReportGroup => ({
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

/** Whether the total's turns must be counted (a day can share a turn, so they are not added up). */
export const countsTurns = (groups: readonly ReportRow[]): boolean => groups.some((g) => g.turns > 0);

/** The total of the groups, added in their order (one pass over the rows); `turns` counted apart. */
export const reportTotal = (groups: readonly ReportRow[], turns: number): ReportGroup =>
  toGroup(totalOf(groups, turns));

function totalOf(groups: readonly ReportRow[], turns: number): ReportRow {
  const total: ReportRow = {
    key: 'total',
    rows: 0,
    turns,
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
  return total;
}

/** The report from its parts: the groups' rows, the total, and what it leaves out. */
export function reportOf(
  window: { since: string; until: string; by: GroupBy },
  rows: readonly ReportRow[],
  total: ReportGroup,
  unmetered: UnmeteredGroup[],
  unpricedModels: string[],
): UsageReport {
  return {
    since: window.since,
    until: window.until,
    by: window.by,
    groups: rows.map(toGroup),
    total,
    notIncluded: {
      unmetered,
      unmeteredCount: unmetered.reduce((n, u) => n + u.count, 0),
      unpricedModels,
      unpricedRows: total.unpricedRows,
    },
  };
}

/** Sessions per query (SQLite's bound on an IN list; PostgreSQL asks them the same way, so in the same order). */
export const COST_IDS_PER_QUERY = 500;

/** One (session, turn)'s rows, rows outside any turn under a NULL turn; cost NULL when none is priced. */
export interface CostRow {
  session_id: string;
  turn_id: number | null;
  rows: number;
  cost: number | null;
  unpriced: number;
  bases: string | null;
}

const figureOf = (r: CostRow): CostFigure => ({
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

/** The sessions asked for, each once, in chunks of COST_IDS_PER_QUERY. */
export function costChunks(sessionIds: readonly string[]): string[][] {
  const ids = [...new Set(sessionIds)];
  const out: string[][] = [];
  for (let i = 0; i < ids.length; i += COST_IDS_PER_QUERY) out.push(ids.slice(i, i + COST_IDS_PER_QUERY));
  return out;
}

/** Fold (session, turn) rows, in the order read, into each session's costs, whole and by turn. */
export function addCostRows(out: Map<string, SessionCosts>, rows: readonly CostRow[]): void {
  for (const r of rows) {
    const costs = out.get(r.session_id) ?? { total: EMPTY, turns: new Map<number, CostFigure>() };
    const figure = figureOf(r);
    costs.total = addFigures(costs.total, figure);
    if (r.turn_id !== null) costs.turns.set(r.turn_id, figure);
    out.set(r.session_id, costs);
  }
}
