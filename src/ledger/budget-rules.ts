import type { BudgetFigures, BudgetQuery, BudgetScope } from '../core/ports/budgets.js';
import type { BudgetDimension, BudgetHold, BudgetRaise, SessionHold } from '../core/ports/sessions.js';

/**
 * The budget rules, as functions of plain data (no store, no clock of their own): which figures a
 * check needs, whether a ceiling is reached, what that does to a session's hold. The I/O around
 * them (reading the figures, setting the hold) is ledger/budget-hold.ts.
 */

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

/** The figures read for a check, by scope. */
export type BudgetUsage = Partial<Record<BudgetScope, BudgetFigures>>;

const SCOPES: ReadonlyArray<[BudgetScope, keyof Budgets]> = [
  ['session', 'session'],
  ['work-item', 'workItem'],
];

/** Where a scope's turn window starts ('' when it counts all time). */
const windowStart = (budget: Budget, now: Date): string =>
  budget.windowHours ? new Date(now.getTime() - budget.windowHours * 3_600_000).toISOString() : '';

/** The figures a check of these ceilings reads: a scope or a figure no ceiling uses is not read. */
export function budgetQueries(
  session: { id: string; workItem: string },
  budgets: Budgets,
  now: Date,
): BudgetQuery[] {
  const queries: BudgetQuery[] = [];
  for (const [scope, name] of SCOPES) {
    const budget = budgets[name];
    const turns = budget.maxTurns !== undefined;
    const spend = budget.maxTokens !== undefined || budget.maxUsd !== undefined;
    if (!turns && !spend) continue;
    queries.push({
      scope,
      key: scope === 'session' ? session.id : session.workItem,
      turnsSince: turns ? windowStart(budget, now) : undefined,
      spend,
    });
  }
  return queries;
}

/**
 * Is a session over one of its ceilings (its own, or its work item's), with what a person raised
 * them by? Turns count in the window; tokens and dollars over all time (priced rows only for
 * dollars: an unknown cost cannot reach a dollar ceiling — which is why an unmetered session can
 * only be bounded by turns). Returns the first ceiling reached (session before work item; turns,
 * tokens, dollars), or null.
 */
export function overBudget(
  raise: BudgetRaise,
  budgets: Budgets,
  usage: BudgetUsage,
  now: Date,
): BudgetHold | null {
  for (const [scope, name] of SCOPES) {
    const budget = budgets[name];
    const used = usage[scope] ?? {};
    const check = (dimension: BudgetDimension, limit: number | undefined, value: number | undefined) => {
      if (limit === undefined) return null;
      const ceiling = limit + (raise[dimension] ?? 0);
      const amount = value ?? 0;
      if (amount < ceiling) return null;
      const window = scope === 'session' && dimension === 'turns' && budget.windowHours;
      return {
        kind: 'over-budget' as const,
        reason: `${WHAT[dimension]}: ${formatAmount(dimension, amount)} of ${formatAmount(dimension, ceiling)} (${scope}${window ? `, last ${budget.windowHours} h` : ''})`,
        dimension,
        scope,
        used: amount,
        limit: ceiling,
        since: now.toISOString(),
      };
    };
    const hold =
      check('turns', budget.maxTurns, used.turns) ??
      check('tokens', budget.maxTokens, used.tokens) ??
      check('usd', budget.maxUsd, used.usd);
    if (hold) return hold;
  }
  return null;
}

const WHAT: Record<BudgetDimension, string> = {
  turns: 'turn ceiling reached',
  tokens: 'token ceiling reached',
  usd: 'estimated-cost ceiling reached',
};

/** A breach or an unaccounted session is released by a person only: its ceilings are not read. */
export const checksBudget = (hold: SessionHold | null): boolean => !hold || hold.kind === 'over-budget';

/**
 * What a budget check does to a session's hold (evaluated every time: a window that moved on, or a
 * ceiling raised in the config, releases it). `keep`: the hold stays as it is; `release`: the
 * over-budget hold goes; `hold`: a new one is put on; `none`: no hold, nothing to write.
 */
export type HoldDecision =
  | { kind: 'keep'; hold: SessionHold }
  | { kind: 'release' }
  | { kind: 'hold'; hold: BudgetHold }
  | { kind: 'none' };

export function budgetHoldDecision(current: SessionHold | null, found: BudgetHold | null): HoldDecision {
  if (current && !checksBudget(current)) return { kind: 'keep', hold: current };
  if (!found) return current ? { kind: 'release' } : { kind: 'none' };
  return current ? { kind: 'keep', hold: current } : { kind: 'hold', hold: found };
}

/** The session's hold after a decision (null: none). */
export const holdAfter = (decision: HoldDecision): SessionHold | null =>
  decision.kind === 'keep' || decision.kind === 'hold' ? decision.hold : null;

/** Whether a budget has any ceiling at all. */
export const hasCeiling = (b: Budget): boolean =>
  b.maxTurns !== undefined || b.maxTokens !== undefined || b.maxUsd !== undefined;

/** What people raised a work item's ceilings by, over all its sessions. */
export function sumRaises(raises: readonly BudgetRaise[]): BudgetRaise {
  const total: BudgetRaise = {};
  for (const raise of raises) {
    for (const [k, v] of Object.entries(raise) as Array<[BudgetDimension, number]>)
      total[k] = (total[k] ?? 0) + v;
  }
  return total;
}

/** Why a work item with no active session is held (its own ceilings reached), if it is. */
export const workItemHeldReason = (hold: BudgetHold | null): string | undefined =>
  hold ? `${hold.reason}; raise budgets.workItem in the config to go on` : undefined;

/**
 * The ceilings the gateway applies to model requests: tokens and dollars (turn ceilings are the
 * dispatcher's: the running turn is already counted). undefined when there is none.
 */
export function wireBudgets(budgets: Budgets): Budgets | undefined {
  const { session: s, workItem: w } = budgets;
  if (!s.maxTokens && !s.maxUsd && !w.maxTokens && !w.maxUsd) return undefined;
  return {
    session: { maxTokens: s.maxTokens, maxUsd: s.maxUsd },
    workItem: { maxTokens: w.maxTokens, maxUsd: w.maxUsd },
  };
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
