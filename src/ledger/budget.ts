import type { BudgetDimension, BudgetRaise, SessionHold, SessionRecord } from '../core/ports/sessions.js';
import type { Db } from '../store/db.js';

export interface Budget {
  maxTurns?: number | undefined;
  windowHours?: number | undefined;
  maxTokens?: number | undefined;
  maxUsd?: number | undefined;
}

export interface Budgets {
  session: Budget;
  workItem: Budget;
}

const SCOPE_SQL = {
  session: { turns: 'session_id = ?', ledger: 'session_id = ?' },
  'work-item': {
    turns: 'session_id IN (SELECT id FROM sessions WHERE work_item = ?)',
    ledger: 'work_item = ?',
  },
} as const;

/**
 * Is a session over one of its ceilings (its own, or its work item's), with what a person raised
 * them by? Turns count in the window; tokens and dollars over all time, from the usage ledger
 * (priced rows only for dollars: an unknown cost cannot reach a dollar ceiling — which is why an
 * unmetered session can only be bounded by turns). Returns the first ceiling reached, or null.
 */
export function overBudget(
  db: Db,
  session: Pick<SessionRecord, 'id' | 'workItem' | 'budgetRaise'>,
  budgets: Budgets,
  now: Date = new Date(),
): SessionHold | null {
  const scopes: Array<['session' | 'work-item', Budget, string]> = [
    ['session', budgets.session, session.id],
    ['work-item', budgets.workItem, session.workItem],
  ];
  const raise: BudgetRaise = session.budgetRaise;
  for (const [scope, budget, key] of scopes) {
    const sql = SCOPE_SQL[scope];
    const check = (
      dimension: BudgetDimension,
      limit: number | undefined,
      used: () => number,
      what: string,
    ) => {
      if (limit === undefined) return null;
      const ceiling = limit + (raise[dimension] ?? 0);
      const value = used();
      if (value < ceiling) return null;
      return {
        kind: 'over-budget' as const,
        reason: `${what}: ${formatAmount(dimension, value)} of ${formatAmount(dimension, ceiling)} (${scope}${scope === 'session' && dimension === 'turns' && budget.windowHours ? `, last ${budget.windowHours} h` : ''})`,
        dimension,
        scope,
        used: value,
        limit: ceiling,
        since: now.toISOString(),
      };
    };
    const windowStart = budget.windowHours
      ? new Date(now.getTime() - budget.windowHours * 3_600_000).toISOString()
      : '';
    const hold =
      check(
        'turns',
        budget.maxTurns,
        () =>
          (
            db
              .prepare(`SELECT COUNT(*) AS n FROM turns WHERE ${sql.turns} AND started_at >= ?`)
              .get(key, windowStart) as { n: number }
          ).n,
        'turn ceiling reached',
      ) ??
      check(
        'tokens',
        budget.maxTokens,
        () =>
          (
            db
              .prepare(
                `SELECT COALESCE(SUM(input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens + reasoning_tokens), 0) AS n
                   FROM usage_ledger WHERE ${sql.ledger}`,
              )
              .get(key) as { n: number }
          ).n,
        'token ceiling reached',
      ) ??
      check(
        'usd',
        budget.maxUsd,
        () =>
          (
            db
              .prepare(`SELECT COALESCE(SUM(cost_usd), 0) AS n FROM usage_ledger WHERE ${sql.ledger}`)
              .get(key) as {
              n: number;
            }
          ).n,
        'estimated-cost ceiling reached',
      );
    if (hold) return hold;
  }
  return null;
}

export function formatAmount(dimension: BudgetDimension, n: number): string {
  if (dimension === 'usd') return `~$${n.toFixed(2)} estimated`;
  return `${n.toLocaleString('en-US')} ${dimension}`;
}

/** `--raise` amounts: a plain number in the unit of the ceiling that was reached. */
export function parseRaise(text: string, dimension: BudgetDimension): number {
  const cleaned = text.trim().replace(/^\$/, '');
  const n = Number(cleaned);
  if (!Number.isFinite(n) || n <= 0 || n > 1e12) return Number.NaN;
  if (dimension !== 'usd' && !Number.isInteger(n)) return Number.NaN;
  return n;
}
