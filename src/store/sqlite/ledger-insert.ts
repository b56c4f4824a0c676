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

/**
 * An import's rows mostly share everything but their ids, times and figures (one write's recorded
 * time, one meter, engine and payer, a few models and sessions): those shared columns are written as
 * SQL literals in a statement of their own, prepared once per write for each set of them, and only the
 * rest is bound per row. Binding a string costs more than its row's whole index insert (it is copied
 * into UTF-8 twice): 22 parameters a row, 9 of them strings, took a fifth of the writer's time.
 */
const SHARED_COLUMNS = `meter, session_id, work_item, turn_id, engine, runner, model, cost_basis, price_key,
  payer_kind, payer_id, recorded_at, partial`;
const INSERT_SHARED = `INSERT INTO usage_ledger (source_id, at, input_tokens, output_tokens, cache_read_tokens,
  cache_creation_tokens, reasoning_tokens, cache_creation_1h_tokens, cost_usd, ${SHARED_COLUMNS})
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, `;
/** Statements of shared columns one write may prepare (an import's pieces need a few: one per model). */
const MAX_SHARED_STATEMENTS = 32;
/** Of those, the ones a row is compared with before its literals are made (see LedgerWriter.recent). */
const RECENT_STATEMENTS = 6;
/** A string written as a literal: printable ASCII (quotes doubled), nothing SQL or UTF-8 could read otherwise. */
const LITERAL_TEXT = /^[\x20-\x7e]{0,200}$/;

function literal(value: string | number | null | undefined): string | undefined {
  // undefined is stored as NULL by the bound path too.
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number') return Number.isSafeInteger(value) ? String(value) : undefined;
  if (typeof value !== 'string') return undefined;
  return LITERAL_TEXT.test(value) ? `'${value.replaceAll("'", "''")}'` : undefined;
}

/** What the ledger's CHECK constraints allow: an import checks its rows here (see SqliteLedgerImport). */
const PAYER_KINDS: ReadonlySet<unknown> = new Set(['api-key', 'subscription', 'cloud', 'unknown']);
const COST_BASES: ReadonlySet<unknown> = new Set([null, 'engine-reported', 'list-price']);

/** The shared columns of rows written through a statement of their own, and that statement. */
interface Shared {
  e: Pick<LedgerEntry, 'meter' | 'sessionId' | 'workItem' | 'turnId' | 'engine' | 'runner' | 'model'>;
  basis: RowPrice['basis'];
  priceKey: string | null;
  payerKind: string;
  payerId: string | null;
  partial: boolean;
  statement: Statement;
}

const sameShared = (s: Shared, e: LedgerEntry, p: RowPrice): boolean =>
  s.e.model === e.model &&
  s.priceKey === p.priceKey &&
  s.basis === p.basis &&
  s.e.sessionId === e.sessionId &&
  s.e.meter === e.meter &&
  s.e.engine === e.engine &&
  s.payerKind === e.payer.kind &&
  s.payerId === e.payer.id &&
  s.e.turnId === e.turnId &&
  s.e.workItem === e.workItem &&
  s.e.runner === e.runner &&
  s.partial === (e.partial === true);

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
  /** The shared columns' statements of the current write, by their literals (see INSERT_SHARED). */
  private readonly shared = new Map<string, Shared>();
  private sharedAt: string | undefined;
  /**
   * The statements used last, most recent first: a row is compared with these before its literals are
   * made (an import's models alternate from row to row: a few statements take nearly every row).
   */
  private recent: Shared[] = [];

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
   * counted into `tally`; a taken (meter, source id) goes to CORRECT_ROW. `bulk` (an import, many rows
   * a write): the shared columns as literals (see INSERT_SHARED), and each row checked against the
   * ledger's CHECK constraints here (the import turns SQLite's own check off: see SqliteLedgerImport).
   */
  write(
    entries: Iterable<LedgerEntry>,
    price: Pricer,
    recordedAt: string,
    tally: HourTally,
    options: { turns?: Set<number> | undefined; bulk?: boolean } = {},
  ): number {
    const { turns, bulk = false } = options;
    let written = 0;
    for (const e of entries) {
      const p = price(e);
      if (turns && e.turnId !== null) turns.add(e.turnId);
      if (bulk && (!PAYER_KINDS.has(e.payer.kind) || !COST_BASES.has(p.basis)))
        throw new Error(`a ledger row of payer kind ${e.payer.kind} and cost basis ${p.basis} is refused`);
      let inserted = bulk ? this.insertShared(e, p, recordedAt) : -1;
      if (inserted < 0) inserted = this.insertBound(e, p, recordedAt);
      if (inserted > 0) tally.add(hourRow(e, p, this.hourOf(e.at)));
      // A row changed here: the ledger's update trigger marks its hour, computed again at flush.
      else written += this.correct.run(...correctParams(e, p, recordedAt)).changes;
      written += inserted;
    }
    return written;
  }

  /**
   * INSERT_NEW: positional parameters, in the statement's order, without an array (binding an object
   * per row cost a sixth of a large import). Returns the rows inserted (0: its key is taken).
   */
  private insertBound(e: LedgerEntry, p: RowPrice, recordedAt: string): number {
    const u = e.usage;
    return this.insertNew.run(
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
  }

  /**
   * The row through the statement of its shared columns: the rows inserted (0: its key is taken), or
   * -1 when its shared columns cannot be literals (INSERT_NEW writes it).
   */
  private insertShared(e: LedgerEntry, p: RowPrice, recordedAt: string): number {
    const statement = this.sharedStatement(e, p, recordedAt);
    if (!statement) return -1;
    const u = e.usage;
    return statement.run(
      e.sourceId,
      e.at,
      u.inputTokens,
      u.outputTokens,
      u.cacheReadTokens,
      u.cacheCreationTokens,
      u.reasoningTokens,
      u.cacheCreation1hTokens ?? 0,
      p.costUsd,
    ).changes;
  }

  private sharedStatement(e: LedgerEntry, p: RowPrice, recordedAt: string): Statement | undefined {
    if (this.sharedAt !== recordedAt) {
      this.shared.clear();
      this.recent = [];
      this.sharedAt = recordedAt;
    }
    for (const r of this.recent) if (sameShared(r, e, p)) return r.statement;
    const values = [
      e.meter,
      e.sessionId,
      e.workItem,
      e.turnId,
      e.engine,
      e.runner,
      e.model,
      p.basis,
      p.priceKey,
      e.payer.kind,
      e.payer.id,
      recordedAt,
      e.partial ? 1 : 0,
    ].map(literal);
    if (values.includes(undefined)) return undefined;
    const key = values.join(', ');
    let found = this.shared.get(key);
    if (!found) {
      if (this.shared.size >= MAX_SHARED_STATEMENTS) return undefined;
      const sql = `${INSERT_SHARED}${key}) ON CONFLICT (meter, source_id) DO NOTHING`;
      found = {
        e: { ...e },
        basis: p.basis,
        priceKey: p.priceKey,
        payerKind: e.payer.kind,
        payerId: e.payer.id,
        partial: e.partial === true,
        statement: this.db.prepare(sql),
      };
      this.shared.set(key, found);
    }
    this.recent.unshift(found);
    if (this.recent.length > RECENT_STATEMENTS) this.recent.pop();
    return found.statement;
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
