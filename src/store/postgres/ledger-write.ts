/**
 * How the PostgreSQL ledger (ledger.ts, ledger-import.ts) writes rows: in batches, each a statement
 * over arrays (`unnest`), not a statement per row — a `usage scan` writes 100,000s of rows.
 *
 * The rule is SQLite's (store/sqlite/ledger-insert.ts), applied as if the rows were written one
 * after another: a new (meter, source id) is inserted; a taken one is corrected when the row comes
 * again with a larger output count (repriced for the extra output only), with a turn it lacked, or
 * with a price it lacked. A batch that names one key twice is written in rounds (the key's first
 * copy in the first, its second in the next…), so each round names a key once and the outcome is
 * the one-at-a-time outcome.
 *
 * Two writers (two hosts) at once: the inserts of a round go in (meter, source id) order, and the
 * corrections lock their rows in that order first, so writers of the same keys wait for each other
 * instead of deadlocking; a key inserted by the other waits for its commit, then is corrected or
 * left (ON CONFLICT … DO NOTHING, then the correction reads the committed row).
 */
import type { LedgerEntry, Pricer } from '../../core/ports/ledger.js';
import { noNul as text } from '../text.js';
import type { Queryable } from './pg.js';

/**
 * A ledger row to write, copied out of its entry (an import's iterable hands one object again): the
 * entry's own columns as they are (but for NUL, see `noNul`), its usage and price flattened.
 */
export type RowIn = Pick<
  LedgerEntry,
  'sourceId' | 'at' | 'sessionId' | 'workItem' | 'turnId' | 'engine' | 'runner' | 'model'
> & {
  meter: string;
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
  reasoning: number;
  cache1h: number;
  cost: number | null;
  basis: string | null;
  priceKey: string | null;
  payerKind: string;
  payerId: string | null;
  partial: number;
  /** The list price of one output token (the correction's), or null. */
  unit: number | null;
};

/** Rows per statement: a bounded message and parameter size, whatever the batch. */
export const ROWS_PER_STATEMENT = 5000;

/** A float as SQLite stores it: NaN is NULL. */
const real = (value: number | null | undefined): number | null =>
  value === null || value === undefined || Number.isNaN(value) ? null : value;

/** Each entry priced (in order, once) and copied; `turns` collects the entries' turns. */
export function rowsOf(entries: Iterable<LedgerEntry>, price: Pricer, turns?: Set<number>): RowIn[] {
  const rows: RowIn[] = [];
  for (const e of entries) {
    const p = price(e);
    if (turns && e.turnId !== null) turns.add(e.turnId);
    const u = e.usage;
    rows.push({
      meter: text(e.meter),
      sourceId: text(e.sourceId),
      at: text(e.at),
      sessionId: text(e.sessionId),
      workItem: text(e.workItem),
      turnId: e.turnId,
      engine: text(e.engine),
      runner: text(e.runner),
      model: text(e.model),
      input: u.inputTokens,
      output: u.outputTokens,
      cacheRead: u.cacheReadTokens,
      cacheCreation: u.cacheCreationTokens,
      reasoning: u.reasoningTokens,
      cache1h: u.cacheCreation1hTokens ?? 0,
      cost: real(p.costUsd),
      basis: p.basis,
      priceKey: text(p.priceKey),
      payerKind: text(e.payer.kind),
      payerId: text(e.payer.id),
      partial: e.partial ? 1 : 0,
      unit: real(p.outputUnit),
    });
  }
  return rows;
}

const keyOf = (r: RowIn): string => `${r.meter}\u0000${r.sourceId}`;

/** The rows in rounds: each key once per round, in the batch's order (see the file's comment). */
export function rounds(rows: readonly RowIn[]): RowIn[][] {
  const seen = new Map<string, number>();
  const out: RowIn[][] = [];
  for (const r of rows) {
    const key = keyOf(r);
    const n = seen.get(key) ?? 0;
    seen.set(key, n + 1);
    const round = out[n] ?? [];
    round.push(r);
    out[n] = round;
  }
  return out;
}

/**
 * New rows, ids drawn in the batch's order (as SQLite numbers them) but inserted in key order (the
 * order every writer takes its keys' index entries in). Returns the keys inserted.
 */
const INSERT = `INSERT INTO usage_ledger (id, meter, source_id, at, session_id, work_item, turn_id, engine, runner,
    model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
    cache_creation_1h_tokens, cost_usd, cost_basis, price_key, payer_kind, payer_id, recorded_at, partial)
  SELECT id, meter, source_id, at, session_id, work_item, turn_id, engine, runner, model, i, o, cr, cc, r, c1h,
    cost, basis, price_key, payer_kind, payer_id, $22, partial
  FROM (SELECT nextval('usage_ledger_id_seq'::regclass) AS id, t.*
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[],
      $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[],
      $15::bigint[], $16::float8[], $17::text[], $18::text[], $19::text[], $20::text[], $21::bigint[])
      WITH ORDINALITY AS t (meter, source_id, at, session_id, work_item, turn_id, engine, runner, model, i, o,
        cr, cc, r, c1h, cost, basis, price_key, payer_kind, payer_id, partial, ord)
    ORDER BY ord) AS s
  ORDER BY meter COLLATE "C", source_id COLLATE "C"
  ON CONFLICT (meter, source_id) DO NOTHING
  RETURNING meter, source_id`;

/** One array per column, in the order of INSERT's parameters ($1…$21), then the write's time ($22). */
const INSERT_FIELDS = [
  'meter',
  'sourceId',
  'at',
  'sessionId',
  'workItem',
  'turnId',
  'engine',
  'runner',
  'model',
  'input',
  'output',
  'cacheRead',
  'cacheCreation',
  'reasoning',
  'cache1h',
  'cost',
  'basis',
  'priceKey',
  'payerKind',
  'payerId',
  'partial',
] as const satisfies readonly (keyof RowIn)[];

/** The rows' values of the fields named, one array per field (an `unnest` argument each). */
const columnsOf = (rows: readonly RowIn[], fields: readonly (keyof RowIn)[]): unknown[][] =>
  fields.map((f) => rows.map((r) => r[f]));

const insertValues = (rows: readonly RowIn[], recordedAt: string): unknown[] => [
  ...columnsOf(rows, INSERT_FIELDS),
  recordedAt,
];

/**
 * Whether a copy changes its row: a larger output, a turn the row lacks, a price it lacks. Each only
 * grows (output), or is set once (turn, price): a row a concurrent writer changed after this
 * statement's snapshot may stop needing the change (rechecked on the row as committed), never start.
 */
const CHANGES = `(x.output > l.output_tokens OR (l.turn_id IS NULL AND x.turn_id IS NOT NULL)
    OR (l.cost_usd IS NULL AND x.cost IS NOT NULL))`;

/**
 * A taken key's row corrected (SQLite's CORRECT_ROW): the rows a copy changes (CHANGES) locked in key
 * order first (a copy that changes nothing locks nothing), then changed. Under READ
 * COMMITTED a row another writer changed meanwhile is read again as committed before it is changed.
 */
const CORRECT = `WITH x AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[],
      $7::float8[], $8::text[], $9::text[], $10::float8[])
      AS x (meter, source_id, session_id, work_item, turn_id, output, cost, basis, price_key, unit)),
  locked AS (
    SELECT l.id, x.session_id, x.work_item, x.turn_id, x.output, x.cost, x.basis, x.price_key, x.unit
    FROM usage_ledger l JOIN x ON l.meter = x.meter AND l.source_id = x.source_id
    WHERE ${CHANGES}
    ORDER BY l.meter COLLATE "C", l.source_id COLLATE "C" FOR UPDATE OF l)
  UPDATE usage_ledger AS l SET
    output_tokens = GREATEST(l.output_tokens, x.output),
    cost_usd = CASE WHEN l.cost_usd IS NULL THEN x.cost
      WHEN x.output <= l.output_tokens THEN l.cost_usd
      WHEN l.cost_basis = 'list-price' AND x.unit IS NOT NULL
        THEN l.cost_usd + (x.output - l.output_tokens) * x.unit
      ELSE x.cost END,
    cost_basis = CASE WHEN l.cost_usd IS NULL OR (x.output > l.output_tokens
      AND NOT (l.cost_basis = 'list-price' AND x.basis = 'list-price'))
      THEN x.basis ELSE l.cost_basis END,
    price_key = CASE WHEN l.cost_usd IS NULL OR (x.output > l.output_tokens
      AND NOT (l.cost_basis = 'list-price' AND x.basis = 'list-price'))
      THEN x.price_key ELSE l.price_key END,
    turn_id = COALESCE(l.turn_id, x.turn_id),
    session_id = COALESCE(l.session_id, x.session_id),
    work_item = COALESCE(l.work_item, x.work_item)
  FROM locked AS x
  WHERE l.id = x.id AND ${CHANGES}`;

/** CORRECT's parameters ($1…$10): one array per field. */
const CORRECT_FIELDS = [
  'meter',
  'sourceId',
  'sessionId',
  'workItem',
  'turnId',
  'output',
  'cost',
  'basis',
  'priceKey',
  'unit',
] as const satisfies readonly (keyof RowIn)[];

/** One round's rows (each key once), a statement or two per ROWS_PER_STATEMENT: the rows added or corrected. */
async function writeRound(q: Queryable, rows: readonly RowIn[], recordedAt: string): Promise<number> {
  let written = 0;
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    const chunk = rows.slice(i, i + ROWS_PER_STATEMENT);
    const inserted = await q.rows<{ meter: string; source_id: string }>(
      INSERT,
      insertValues(chunk, recordedAt),
    );
    written += inserted.length;
    if (inserted.length === chunk.length) continue;
    const added = new Set(inserted.map((r) => `${r.meter}\u0000${r.source_id}`));
    const taken = chunk.filter((r) => !added.has(keyOf(r)));
    written += await q.run(CORRECT, columnsOf(taken, CORRECT_FIELDS));
  }
  return written;
}

/** Write rows (the caller holds the transaction): the rows added or corrected. */
export async function writeRows(q: Queryable, rows: readonly RowIn[], recordedAt: string): Promise<number> {
  let written = 0;
  for (const round of rounds(rows)) written += await writeRound(q, round, recordedAt);
  return written;
}
