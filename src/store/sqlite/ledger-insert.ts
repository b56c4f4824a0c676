import type Database from 'better-sqlite3';
import type { LedgerEntry, Pricer, RowPrice } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';
import { type HourRow, type HourTally, NO_ENGINE, NO_MODEL, NO_TURN } from './ledger-hours.js';

/** How the ledger's owner (store/sqlite/ledger.ts) writes rows, and counts new ones into their hour. */

type Statement = Database.Statement<unknown[]>;

const INSERT = `INSERT INTO usage_ledger (meter, source_id, at, session_id, work_item, turn_id, engine, runner,
     model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
     cache_creation_1h_tokens, cost_usd, cost_basis, price_key, payer_kind, payer_id, recorded_at, partial)
   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** A new row: nothing when its (meter, source id) is taken (CORRECT_ROW then says what changes). */
const INSERT_NEW = `${INSERT} ON CONFLICT (meter, source_id) DO NOTHING`;

/** A row again, for a (meter, source id) that is taken: corrects that row (see the WHERE). */
const CORRECT_ROW = `${INSERT}
   ON CONFLICT (meter, source_id) DO UPDATE SET
     -- Claude Code writes a message once per content block while it streams: early copies can
     -- carry a placeholder output count; the largest one seen is the message's.
     output_tokens = MAX(output_tokens, excluded.output_tokens),
     -- Repriced for the extra output only (the last parameter: the list price of one output
     -- token), so the first record's input figures keep their cost.
     cost_usd = CASE WHEN cost_usd IS NULL THEN excluded.cost_usd
       WHEN excluded.output_tokens <= output_tokens THEN cost_usd
       WHEN cost_basis = 'list-price' AND ? IS NOT NULL
         THEN cost_usd + (excluded.output_tokens - output_tokens) * ?
       ELSE excluded.cost_usd END,
     -- The basis and the key go with the cost: set when it was unknown or was replaced whole.
     cost_basis = CASE WHEN cost_usd IS NULL OR (excluded.output_tokens > output_tokens
       AND NOT (cost_basis = 'list-price' AND excluded.cost_basis = 'list-price'))
       THEN excluded.cost_basis ELSE cost_basis END,
     price_key = CASE WHEN cost_usd IS NULL OR (excluded.output_tokens > output_tokens
       AND NOT (cost_basis = 'list-price' AND excluded.cost_basis = 'list-price'))
       THEN excluded.price_key ELSE price_key END,
     -- A row imported by a scan first gets its turn when the turn records it.
     turn_id = COALESCE(turn_id, excluded.turn_id),
     session_id = COALESCE(session_id, excluded.session_id),
     work_item = COALESCE(work_item, excluded.work_item)
   WHERE excluded.output_tokens > output_tokens OR (turn_id IS NULL AND excluded.turn_id IS NOT NULL)
     OR (cost_usd IS NULL AND excluded.cost_usd IS NOT NULL)`;

/** `at`'s first 13 characters in JS when they are ASCII (SQLite counts characters, JS UTF-16 units). */
const ASCII = /^[\x01-\x7f]*$/;

/** The rollup's view of a new row, as stored (SQLite stores a NaN as NULL). */
function hourRow(e: LedgerEntry, p: RowPrice, hour: string): HourRow {
  const u = e.usage;
  return {
    hour,
    engine: e.engine ?? NO_ENGINE,
    model: e.model ?? NO_MODEL,
    payer: e.payer.id === null || e.payer.id === undefined ? e.payer.kind : `${e.payer.kind} ${e.payer.id}`,
    basis: p.basis ?? '',
    turn_id: e.turnId ?? NO_TURN,
    input: u.inputTokens,
    output: u.outputTokens,
    cache_read: u.cacheReadTokens,
    cache_creation: u.cacheCreationTokens,
    reasoning: u.reasoningTokens,
    cost: p.costUsd === null || Number.isNaN(p.costUsd) ? null : p.costUsd,
  };
}

export class LedgerWriter {
  private readonly insertNew: Statement;
  private readonly correct: Statement;
  private substr: Statement | undefined;

  constructor(private readonly db: Db) {
    this.insertNew = db.prepare(INSERT_NEW);
    this.correct = db.prepare(CORRECT_ROW);
  }

  private hourOf(at: string): string {
    const head = at.slice(0, 13);
    if (ASCII.test(head)) return head;
    this.substr ??= this.db.prepare(`SELECT substr(?, 1, 13)`).pluck();
    return this.substr.get(at) as string;
  }

  /**
   * Insert rows (the caller holds the transaction); returns the rows added or corrected. A new row is
   * counted into `tally`; a taken (meter, source id) goes to CORRECT_ROW. Positional parameters, in
   * the statement's order, without an array (binding an object per row cost a sixth of a large import).
   */
  write(
    entries: Iterable<LedgerEntry>,
    price: Pricer,
    recordedAt: string,
    tally: HourTally,
    turns?: Set<number>,
  ): number {
    let written = 0;
    for (const e of entries) {
      const p = price(e);
      const u = e.usage;
      if (turns && e.turnId !== null) turns.add(e.turnId);
      const inserted = this.insertNew.run(
        e.meter,
        e.sourceId,
        e.at,
        e.sessionId,
        e.workItem,
        e.turnId,
        e.engine,
        e.runner,
        e.model,
        u.inputTokens,
        u.outputTokens,
        u.cacheReadTokens,
        u.cacheCreationTokens,
        u.reasoningTokens,
        u.cacheCreation1hTokens ?? 0,
        p.costUsd,
        p.basis,
        p.priceKey,
        e.payer.kind,
        e.payer.id,
        recordedAt,
        e.partial ? 1 : 0,
      ).changes;
      if (inserted > 0) tally.add(hourRow(e, p, this.hourOf(e.at)));
      // A row changed here: the ledger's update trigger marks its hour, computed again at flush.
      else written += this.correct.run(...correctParams(e, p, recordedAt)).changes;
      written += inserted;
    }
    return written;
  }
}

/** CORRECT_ROW's parameters: INSERT_NEW's, then the list price of one output token twice. */
function correctParams(e: LedgerEntry, p: RowPrice, recordedAt: string): unknown[] {
  const u = e.usage;
  return [
    e.meter,
    e.sourceId,
    e.at,
    e.sessionId,
    e.workItem,
    e.turnId,
    e.engine,
    e.runner,
    e.model,
    u.inputTokens,
    u.outputTokens,
    u.cacheReadTokens,
    u.cacheCreationTokens,
    u.reasoningTokens,
    u.cacheCreation1hTokens ?? 0,
    p.costUsd,
    p.basis,
    p.priceKey,
    e.payer.kind,
    e.payer.id,
    recordedAt,
    e.partial ? 1 : 0,
    p.outputUnit,
    p.outputUnit,
  ];
}
