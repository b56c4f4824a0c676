/**
 * The ledger's writes and sums other PostgreSQL stores make through it (the ledger owns
 * `usage_ledger` and `unmetered_drives`): the session store records a lost turn's drive in its own
 * transaction, the budgets read a session's or a work item's sums. And the ledger's own exact sum
 * of dollars (`costSum`), which every sum of `cost_usd` uses.
 */
import type { UnmeteredDrive } from '../../core/ports/ledger.js';
import type { Queryable } from './pg.js';

/** 2^-k as an exact decimal (5^k / 10^k): a numeric literal with k digits after the point. */
function pow2neg(k: number): string {
  const digits = (5n ** BigInt(k)).toString().padStart(k, '0');
  return `0.${digits}::numeric`;
}

/** The fraction below `f` (|f| < 1) times 2^52: exact in float8 (a power of two scales, trunc keeps bits). */
const next = (f: string): string => `((${f}) - trunc(${f})) * 4503599627370496::float8`;

/**
 * The sum of a float8 column's values as SQLite's SUM gives it (Kahan-Babuska-Neumaier: the exact
 * sum, rounded once, short of an error of ~2^-100 of it), where PostgreSQL's SUM(float8) adds
 * naively and rounds at every row, and float8 → numeric keeps only 15 digits. Each value is cut,
 * exactly, into integers: its whole part and three 52-bit pieces of its fraction (every bit of a
 * value from 2^-104 up to 2^62), summed as BIGINT (into an exact numeric), scaled back by exact
 * powers of two, and the sum rounded to float8 once. Values beyond those bounds (a hostile meter's)
 * are added approximately. NULL when no value is there (none priced): unknown, never 0.
 */
export function costSum(x: string): string {
  const normal = `abs(${x}) < 4611686018427387904::float8 AND abs(${x}) >= 7.888609052210118e-31::float8`;
  const g1 = next(x);
  const g2 = next(g1);
  const g3 = next(g2);
  const part = (g: string, scale: string) =>
    `COALESCE(SUM(CASE WHEN ${normal} THEN trunc(${g})::bigint END), 0)${scale}`;
  return `CASE WHEN COUNT(${x}) > 0 THEN (${part(x, '')} + ${part(g1, ` * ${pow2neg(52)}`)}
      + ${part(g2, ` * ${pow2neg(104)}`)} + ${part(g3, ` * ${pow2neg(156)}`)}
      + COALESCE(SUM(CASE WHEN abs(${x}) >= 4611686018427387904::float8 THEN ${x}::numeric END), 0))::float8
    + COALESCE(SUM(CASE WHEN abs(${x}) < 7.888609052210118e-31::float8 THEN ${x} END), 0) END`;
}

/** A turn nothing measured, in the unmetered drives (once per turn), on the caller's connection. */
export async function insertUnmeteredDrive(q: Queryable, d: UnmeteredDrive): Promise<void> {
  await q.run(
    `INSERT INTO unmetered_drives (at, session_id, work_item, turn_id, engine, runner, reason)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (turn_id) DO NOTHING`,
    [d.at, d.sessionId, d.workItem, d.turnId, d.engine, d.runner, d.reason],
  );
}

const SUMS = `SELECT COALESCE(SUM(input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens
      + reasoning_tokens), 0) AS tokens, COALESCE(${costSum('cost_usd')}, 0) AS usd FROM usage_ledger`;

/** What a session's (or a work item's) rows add up to: all tokens, and the priced rows' dollars. */
export async function ledgerSums(
  q: Queryable,
  scope: 'session' | 'work-item',
  key: string,
): Promise<{ tokens: number; usd: number }> {
  const column = scope === 'session' ? 'session_id' : 'work_item';
  const row = await q.row<{ tokens: number; usd: number }>(`${SUMS} WHERE ${column} = $1`, [key]);
  return row ?? { tokens: 0, usd: 0 };
}
