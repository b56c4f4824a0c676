/**
 * What the budget ceilings read: turns counted from the registry, tokens and dollars from the usage
 * ledger, for one session or for every session of a work item. The rules that judge them are pure
 * (ledger/budget-rules.ts); the SQLite store answers (store/sqlite/budgets.ts).
 */

export type BudgetScope = 'session' | 'work-item';

/** The figures one ceiling check needs of one scope (nothing is read that no ceiling uses). */
export interface BudgetQuery {
  scope: BudgetScope;
  /** The session id (scope `session`), or the work item in its canonical case. */
  key: string;
  /** Count the turns started since this instant (ISO; '' for all time); undefined: not needed. */
  turnsSince?: string | undefined;
  /** Sum the ledger's tokens and its priced rows' dollars (all time). */
  spend?: boolean | undefined;
}

/** What was used, for the figures asked. */
export interface BudgetFigures {
  turns?: number | undefined;
  tokens?: number | undefined;
  usd?: number | undefined;
}

export interface BudgetStore {
  usage(query: BudgetQuery): Promise<BudgetFigures>;
}
