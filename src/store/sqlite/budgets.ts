import type { BudgetFigures, BudgetQuery, BudgetStore } from '../../core/ports/budgets.js';
import type { Db } from '../db.js';
import { ledgerSums } from './ledger.js';
import { countTurns } from './turns.js';

/**
 * The budgets' figures on SQLite. It owns no table: turns are counted by the session store's owner
 * (turns.ts), tokens and dollars summed by the ledger's (ledger.ts).
 */
export class SqliteBudgets implements BudgetStore {
  constructor(private readonly db: Db) {}

  async usage(query: BudgetQuery): Promise<BudgetFigures> {
    const figures: BudgetFigures = {};
    if (query.turnsSince !== undefined)
      figures.turns = countTurns(this.db, query.scope, query.key, query.turnsSince);
    if (query.spend) Object.assign(figures, ledgerSums(this.db, query.scope, query.key));
    return figures;
  }
}
