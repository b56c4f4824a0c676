import type { BudgetQuery, BudgetStore } from '../core/ports/budgets.js';
import type { BudgetHold, SessionHold, SessionRecord, SessionStore } from '../core/ports/sessions.js';
import type { Logger } from '../log/logger.js';
import {
  type Budgets,
  type BudgetUsage,
  budgetHoldDecision,
  budgetQueries,
  checksBudget,
  hasCeiling,
  holdAfter,
  overBudget,
  sumRaises,
  workItemHeldReason,
} from './budget-rules.js';

/**
 * The I/O around the budget rules (budget-rules.ts): the figures read through the budgets' port, the
 * hold set through the session store, what changed logged.
 */
export interface HoldDeps {
  budgets: BudgetStore;
  store: Pick<SessionStore, 'setHold' | 'list' | 'findActive'>;
  logger: Logger;
  loaded: { config: { budgets: Budgets } };
}

/** The figures of each query, by scope. */
export async function readBudgetUsage(
  budgets: BudgetStore,
  queries: readonly BudgetQuery[],
): Promise<BudgetUsage> {
  const usage: BudgetUsage = {};
  for (const q of queries) usage[q.scope] = await budgets.usage(q);
  return usage;
}

/** Put on or release the session's hold as the rules decided; returns its hold after. */
async function applyHold(
  app: Pick<HoldDeps, 'store' | 'logger'>,
  session: SessionRecord,
  found: BudgetHold | null,
): Promise<SessionHold | null> {
  const decision = budgetHoldDecision(session.hold, found);
  if (decision.kind === 'release') {
    await app.store.setHold(session.id, null);
    app.logger.info('session no longer over budget: released', { workItem: session.workItem });
  } else if (decision.kind === 'hold') {
    await app.store.setHold(session.id, decision.hold);
    app.logger.warn('session over budget: its deliveries are held', {
      workItem: session.workItem,
      session: session.id,
      reason: decision.hold.reason,
    });
  }
  return holdAfter(decision);
}

/**
 * The session's hold, putting one on when a budget ceiling is reached (checked after each turn and
 * before each delivery, so a ceiling lowered in the config applies to running sessions too).
 */
export async function holdIfOverBudget(app: HoldDeps, session: SessionRecord): Promise<SessionHold | null> {
  if (!checksBudget(session.hold)) return session.hold;
  const now = new Date();
  const { budgets } = app.loaded.config;
  const usage = await readBudgetUsage(app.budgets, budgetQueries(session, budgets, now));
  return applyHold(app, session, overBudget(session.budgetRaise, budgets, usage, now));
}

/** After a turn: an active session that reached a ceiling is held (an ended one is left as it is). */
export async function holdAfterTurn(app: HoldDeps, session: SessionRecord): Promise<void> {
  if (session.status === 'active') await holdIfOverBudget(app, session);
}

/** The ceilings of a work item with no active session: its own, with every raise of its sessions. */
async function workItemCheck(app: Pick<HoldDeps, 'store' | 'loaded'>, workItem: string) {
  const ceiling = app.loaded.config.budgets.workItem;
  if (!hasCeiling(ceiling)) return undefined;
  const raise = sumRaises((await app.store.list({ workItem })).map((s) => s.budgetRaise));
  const budgets: Budgets = { session: {}, workItem: ceiling };
  return { raise, budgets, queries: budgetQueries({ id: '', workItem }, budgets, new Date()) };
}

/**
 * Why deliveries to a work item are held, if they are: its active session's hold (put on when a
 * ceiling is reached); with no active session (none yet, or it was closed), its own ceilings, with
 * what people raised them by on its earlier sessions.
 */
export async function heldReason(app: HoldDeps, workItem: string): Promise<string | undefined> {
  const session = await app.store.findActive(workItem);
  if (session) return (await holdIfOverBudget(app, session))?.reason;
  const check = await workItemCheck(app, workItem);
  if (!check) return undefined;
  const usage = await readBudgetUsage(app.budgets, check.queries);
  return workItemHeldReason(overBudget(check.raise, check.budgets, usage, new Date()));
}
