import type { Usage } from '../core/events.js';
import type { LedgerEntry } from '../core/ports/ledger.js';

/**
 * The usage ledger's rows as both ledgers read them (store/sqlite/ledger.ts, store/postgres/ledger.ts):
 * an unpriced row as the pricer reads it (`repriceUnknown`), and a turn's totals (`turnTotals`).
 */

/** The columns of an UnpricedRow. */
export const UNPRICED_COLUMNS = `id, meter, source_id, at, model, input_tokens, output_tokens, cache_read_tokens,
  cache_creation_tokens, reasoning_tokens, cache_creation_1h_tokens, payer_kind, payer_id`;

export interface UnpricedRow {
  id: number;
  meter: LedgerEntry['meter'];
  source_id: string;
  at: string;
  model: string;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  reasoning_tokens: number;
  cache_creation_1h_tokens: number;
  payer_kind: LedgerEntry['payer']['kind'];
  payer_id: string | null;
}

/** A stored row as the pricer reads it (no engine figure: a row with one was priced by it). */
export function unpricedEntry(r: UnpricedRow): LedgerEntry {
  return {
    meter: r.meter,
    sourceId: r.source_id,
    at: r.at,
    sessionId: null,
    workItem: null,
    turnId: null,
    engine: null,
    runner: null,
    model: r.model,
    usage: {
      inputTokens: r.input_tokens,
      outputTokens: r.output_tokens,
      cacheReadTokens: r.cache_read_tokens,
      cacheCreationTokens: r.cache_creation_tokens,
      reasoningTokens: r.reasoning_tokens,
      ...(r.cache_creation_1h_tokens > 0 ? { cacheCreation1hTokens: r.cache_creation_1h_tokens } : {}),
    },
    payer: { kind: r.payer_kind, id: r.payer_id } as LedgerEntry['payer'],
  };
}

/** A turn's rows summed: their count, each figure's sum, and the models (each once, by first row). */
export interface TurnTotalsRow {
  n: number;
  i: number;
  o: number;
  cr: number;
  cc: number;
  r: number;
  models: string | null;
}

/** A turn's totals from its summed row; undefined when the turn has no row. */
export function turnTotalsOf(
  row: TurnTotalsRow | undefined,
): { usage: Usage; model: string | null } | undefined {
  if (!row || row.n === 0) return undefined;
  return {
    usage: {
      inputTokens: row.i,
      outputTokens: row.o,
      cacheReadTokens: row.cr,
      cacheCreationTokens: row.cc,
      reasoningTokens: row.r,
    },
    model: row.models,
  };
}
