import type { BudgetStore } from '../../core/ports/budgets.js';
import { notBuilt } from './not-built.js';

export const PgBudgets = notBuilt<BudgetStore>('budgets');
