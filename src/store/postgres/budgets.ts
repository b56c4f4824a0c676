import type { BudgetFigures, BudgetQuery, BudgetStore } from '../../core/ports/budgets.js';
import { ledgerSums } from './ledger-shared.js';
import type { Pg, Queryable } from './pg.js';
import { countTurns } from './turns.js';

/**
 * The budgets' figures on PostgreSQL. It owns no table: turns are counted by the session store's
 * owner (turns.ts), tokens and dollars summed by the ledger's (ledger-shared.ts). Both figures, when
 * both are asked, are read in one snapshot.
 */
export class PgBudgets implements BudgetStore {
  constructor(private readonly db: Pg) {}

  async usage(query: BudgetQuery): Promise<BudgetFigures> {
    const { turnsSince, spend } = query;
    const read = async (q: Queryable): Promise<BudgetFigures> => {
      const figures: BudgetFigures = {};
      if (turnsSince !== undefined) figures.turns = await countTurns(q, query.scope, query.key, turnsSince);
      if (spend) Object.assign(figures, await ledgerSums(q, query.scope, query.key));
      return figures;
    };
    // One figure is one statement; two are read in one transaction.
    return turnsSince !== undefined && spend ? this.db.tx(read, 'repeatable read') : read(this.db);
  }
}
