import type { LedgerStore } from '../../core/ports/ledger.js';
import { notBuilt } from './not-built.js';

export const PgLedgerStore = notBuilt<LedgerStore>('ledger');
