import type { Config } from '../config/schema.js';
import type { SessionHold, SessionRecord, SessionStore } from '../core/ports/sessions.js';
import type { Logger } from '../log/logger.js';
import type { Db } from '../store/db.js';
import { overBudget } from './budget.js';

/** What applying budget holds needs: the ledger's database, the sessions, the config's ceilings. */
export interface HoldDeps {
  db: Db;
  store: SessionStore;
  logger: Logger;
  loaded: { config: Pick<Config, 'budgets'> };
}

/**
 * The session's hold, putting one on when a budget ceiling is reached (checked after each turn and
 * before each delivery, so a ceiling lowered in the config applies to running sessions too).
 */
export function holdIfOverBudget(app: HoldDeps, session: SessionRecord): SessionHold | null {
  // A breach or an unaccounted session is released by a person only.
  if (session.hold && session.hold.kind !== 'over-budget') return session.hold;
  // Evaluated every time: a window that moved on, or a ceiling raised in the config, releases it.
  const hold = overBudget(app.db, session, app.loaded.config.budgets);
  if (!hold) {
    if (session.hold) {
      app.store.setHold(session.id, null);
      app.logger.info('session no longer over budget: released', { workItem: session.workItem });
    }
    return null;
  }
  if (session.hold) return session.hold;
  app.store.setHold(session.id, hold);
  app.logger.warn('session over budget: its deliveries are held', {
    workItem: session.workItem,
    session: session.id,
    reason: hold.reason,
  });
  return hold;
}

/**
 * Why a work item with no active session (none yet, or it was closed) is held: its own ceilings
 * still apply, with what people raised them by on its earlier sessions.
 */
export function workItemHeldReason(app: HoldDeps, workItem: string): string | undefined {
  const { workItem: ceiling } = app.loaded.config.budgets;
  if (ceiling.maxTurns === undefined && ceiling.maxTokens === undefined && ceiling.maxUsd === undefined) {
    return undefined;
  }
  const budgetRaise: SessionRecord['budgetRaise'] = {};
  for (const s of app.store.list({ workItem })) {
    for (const [k, v] of Object.entries(s.budgetRaise) as Array<[keyof typeof budgetRaise, number]>) {
      budgetRaise[k] = (budgetRaise[k] ?? 0) + v;
    }
  }
  const hold = overBudget(app.db, { id: '', workItem, budgetRaise }, { session: {}, workItem: ceiling });
  return hold ? `${hold.reason}; raise budgets.workItem in the config to go on` : undefined;
}
