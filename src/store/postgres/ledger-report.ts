/**
 * The PostgreSQL ledger's reads (for ledger.ts): the usage report and sessions' costs, grouped
 * straight from `usage_ledger` (PostgreSQL has no hourly rollup). What they give is what SQLite's
 * give for the same rows (store/sqlite/ledger-report.ts, ledger-costs.ts): the same keys, in the same
 * order (byte order: COLLATE "C", as SQLite compares text), the same dollars (costSum: the exact sum
 * rounded once, as SQLite's SUM), the totals added in JS in the same order.
 */
import type {
  CostFigure,
  GroupBy,
  ReportGroup,
  SessionCosts,
  UnmeteredGroup,
  UsageReport,
} from '../../core/ports/ledger.js';
import { costSum } from './ledger-shared.js';
import type { Queryable } from './pg.js';

/** What the report shows for a row without an engine, a model (as SQLite's ledger-hours.ts names them). */
const NO_ENGINE = '(imported)';
const NO_MODEL = '(no model)';

/** SQL for each grouping key: fixed strings only, never outside text (SQLite's KEY_SQL). */
const KEY_SQL: Record<GroupBy, string> = {
  day: 'substr(at, 1, 10)',
  engine: `COALESCE(engine, '${NO_ENGINE}')`,
  model: `COALESCE(model, '${NO_MODEL}')`,
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
  costUsd: (r.priced ?? 0) > 0 ? (r.cost ?? 0) : null,
  unpricedRows: r.unpriced ?? 0,
  costBases: r.bases ? r.bases.split(',').sort() : [],
});

const WINDOW = 'at >= $1 AND at < $2';

const groupsSql = (by: GroupBy): string =>
  `SELECT (${KEY_SQL[by]}) COLLATE "C" AS key, COUNT(*) AS rows, COUNT(DISTINCT turn_id) AS turns,
     SUM(input_tokens) AS input, SUM(output_tokens) AS output, SUM(cache_read_tokens) AS cache_read,
     SUM(cache_creation_tokens) AS cache_creation, SUM(reasoning_tokens) AS reasoning,
     ${costSum('cost_usd')} AS cost, COUNT(cost_usd) AS priced, COUNT(*) - COUNT(cost_usd) AS unpriced,
     string_agg(DISTINCT cost_basis, ',') AS bases
   FROM usage_ledger WHERE ${WINDOW} GROUP BY 1 ORDER BY 1`;

/** The total of the groups, added in key order as SQLite's report adds them; turns counted apart. */
function totalOf(groups: readonly Row[], turns: number): Row {
  const total: Row = {
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
  const rows = await q.rows<Row>(groupsSql(filter.by), [since, until]);
  const turns = rows.some((g) => g.turns > 0)
    ? ((
        await q.row<{ n: number }>(
          `SELECT COUNT(DISTINCT turn_id) AS n FROM usage_ledger WHERE turn_id IS NOT NULL AND ${WINDOW}`,
          [since, until],
        )
      )?.n ?? 0)
    : 0;
  const total = toGroup(totalOf(rows, turns));
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
  return {
    since,
    until,
    by: filter.by,
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

/** Sessions per query, as SQLite asks them (so the answer's order is SQLite's too). */
export const COST_IDS_PER_QUERY = 500;

interface CostRow {
  session_id: string;
  turn_id: number | null;
  rows: number;
  cost: number | null;
  unpriced: number;
  bases: string | null;
}

/** One row per (session, turn), in SQLite's order: session (bytes), then turn (none first). */
const COSTS = `SELECT session_id, turn_id, COUNT(*) AS rows, ${costSum('cost_usd')} AS cost,
    COUNT(*) - COUNT(cost_usd) AS unpriced, string_agg(DISTINCT cost_basis, ',') AS bases
  FROM usage_ledger WHERE session_id = ANY($1::text[])
  GROUP BY session_id, turn_id ORDER BY session_id COLLATE "C", turn_id NULLS FIRST`;

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

/** Each session's rows, whole and by turn; sessions without rows absent. */
export async function sessionCosts(
  q: Queryable,
  sessionIds: readonly string[],
): Promise<Map<string, SessionCosts>> {
  const out = new Map<string, SessionCosts>();
  const ids = [...new Set(sessionIds)];
  for (let i = 0; i < ids.length; i += COST_IDS_PER_QUERY) {
    const chunk = ids.slice(i, i + COST_IDS_PER_QUERY);
    for (const r of await q.rows<CostRow>(COSTS, [chunk])) {
      const costs = out.get(r.session_id) ?? { total: EMPTY, turns: new Map<number, CostFigure>() };
      const figure = figureOf(r);
      costs.total = addFigures(costs.total, figure);
      if (r.turn_id !== null) costs.turns.set(r.turn_id, figure);
      out.set(r.session_id, costs);
    }
  }
  return out;
}
