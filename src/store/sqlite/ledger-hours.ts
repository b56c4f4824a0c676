import type Database from 'better-sqlite3';
import type { Db } from '../db.js';
import { NO_ENGINE, NO_MODEL } from '../report-assembly.js';

/**
 * The ledger's hourly rollup, `usage_hours` (migration 20; written and read by the ledger's owner,
 * store/sqlite/ledger.ts and ledger-report.ts): one row per hour of `at` and per grouping key of the
 * usage report but the work item and the session — its engine, model and payer as the report shows
 * them, cost basis ('' for none), turn (NO_TURN for none) — with the rows' count and sums. `usage` sums
 * the rollup for the whole hours of its window and reads the ledger only for the hours at its edges:
 * a week of 23,000 rows was ~50 ms of SQLite per report, the rollup's ~170 rows take under 1 ms.
 *
 * The dollars are kept exactly enough to add up to what SUM over the ledger's rows gives (SQLite
 * sums floats with Kahan-Babuska-Neumaier): each row's cost goes into `cost` and the rounding error
 * of that addition into `cost_err`; the report sums both columns with SUM. So the figure does not
 * depend on how the rows were grouped into hours (short of an error of about 2^-100 of the total).
 *
 * New rows are added to their hour as they are written (HourTally, flushed in the writer's
 * transaction). A row that is changed or removed marks its hour (the ledger's triggers, in
 * usage_hours_dirty), and rows past usage_hours_mark were inserted by a writer that does not know the
 * rollup (an older the-loop): the report reads such hours from the ledger, and the next flush
 * computes them again from their rows (rebuildHours) before its transaction commits.
 */

/** What the report shows for a row without an engine, a model (KEY_SQL in store/report-assembly.ts). */
export { NO_ENGINE, NO_MODEL };
/** The rollup's turn for rows of no turn: turn ids are positive (tests use 0 too), never this. */
export const NO_TURN = -1;

/** A row's hour: the first 13 characters of `at` (`2026-12-06T19`), as SQLite's substr counts them. */
export const HOUR_SQL = 'substr(at, 1, 13)';

/** The rollup's key of a ledger row, as SQL over `usage_ledger`: what HourTally computes in JS. */
export const HOUR_KEY_SQL = `${HOUR_SQL} AS hour, COALESCE(engine, '${NO_ENGINE}') AS engine,
  COALESCE(model, '${NO_MODEL}') AS model, payer_kind || COALESCE(' ' || payer_id, '') AS payer,
  COALESCE(cost_basis, '') AS basis, COALESCE(turn_id, ${NO_TURN}) AS turn_id`;

/** A ledger row as the rollup counts it. */
export interface HourRow {
  hour: string;
  engine: string;
  model: string;
  payer: string;
  basis: string;
  turn_id: number;
  input: number;
  output: number;
  cache_read: number;
  cache_creation: number;
  reasoning: number;
  /** The row's dollars; null when it has no price. */
  cost: number | null;
}

interface Bucket {
  key: HourRow;
  rows: number;
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
  reasoning: number;
  priced: number;
  cost: number;
  costErr: number;
}

/**
 * `cost += x`, the rounding error into `costErr` (Neumaier's step, as SQLite's SUM takes it). A sum
 * that overflows (a hostile meter's 1e308 costs) has no error to keep: never ±Inf or NaN, which the
 * NOT NULL column would refuse — and with it every later write of the ledger.
 */
function addCost(b: Bucket, x: number): void {
  const t = b.cost + x;
  const err = Number.isFinite(t) ? (Math.abs(b.cost) >= Math.abs(x) ? b.cost - t + x : x - t + b.cost) : 0;
  b.costErr = Number.isFinite(b.costErr + err) ? b.costErr + err : 0;
  b.cost = t;
}

const UPSERT = `INSERT INTO usage_hours (hour, engine, model, payer, basis, turn_id, row_count, input, output,
    cache_read, cache_creation, reasoning, priced, cost, cost_err)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (hour, engine, model, payer, basis, turn_id) DO UPDATE SET
    row_count = row_count + excluded.row_count, input = input + excluded.input, output = output + excluded.output,
    cache_read = cache_read + excluded.cache_read, cache_creation = cache_creation + excluded.cache_creation,
    reasoning = reasoning + excluded.reasoning, priced = priced + excluded.priced,
    cost = cost + excluded.cost,
    -- The error of the addition above, exactly (the right-hand sides read the row as it was); none
    -- once the sum overflows (NaN reads as NULL here: never stored in the NOT NULL column).
    cost_err = CASE WHEN abs(cost + excluded.cost) > 1.7976931348623157e308
        OR abs(cost_err + excluded.cost_err) > 1.7976931348623157e308 THEN 0
      ELSE coalesce(cost_err + excluded.cost_err + CASE WHEN abs(cost) >= abs(excluded.cost)
        THEN (cost - (cost + excluded.cost)) + excluded.cost
        ELSE (excluded.cost - (cost + excluded.cost)) + cost END, 0) END`;

const sameKey = (a: HourRow, b: HourRow): boolean =>
  a.hour === b.hour &&
  a.engine === b.engine &&
  a.model === b.model &&
  a.payer === b.payer &&
  a.basis === b.basis &&
  a.turn_id === b.turn_id;

/** Rows counted into their buckets (hour and keys); a row of the last row's bucket is not looked up. */
class Buckets {
  readonly map = new Map<string, Bucket>();
  private last: Bucket | undefined;

  add(r: HourRow): void {
    let b = this.last;
    if (!b || !sameKey(b.key, r)) {
      const id = `${r.hour}\u0000${r.engine}\u0000${r.model}\u0000${r.payer}\u0000${r.basis}\u0000${r.turn_id}`;
      b = this.map.get(id);
      if (!b) {
        b = {
          key: r,
          rows: 0,
          input: 0,
          output: 0,
          cacheRead: 0,
          cacheCreation: 0,
          reasoning: 0,
          priced: 0,
          cost: 0,
          costErr: 0,
        };
        this.map.set(id, b);
      }
      this.last = b;
    }
    b.rows += 1;
    b.input += r.input;
    b.output += r.output;
    b.cacheRead += r.cache_read;
    b.cacheCreation += r.cache_creation;
    b.reasoning += r.reasoning;
    if (r.cost !== null) {
      b.priced += 1;
      addCost(b, r.cost);
    }
  }

  clear(): void {
    this.map.clear();
    this.last = undefined;
  }
}

type Statement = Database.Statement<unknown[]>;

const PENDING = `SELECT hour FROM usage_hours_dirty UNION SELECT ${HOUR_SQL} FROM usage_ledger
  WHERE id > (SELECT last_id FROM usage_hours_mark)`;
const DIRTY = 'SELECT hour FROM usage_hours_dirty';
const CLEAN = 'DELETE FROM usage_hours_dirty';
const MARK = 'UPDATE usage_hours_mark SET last_id = (SELECT COALESCE(MAX(id), 0) FROM usage_ledger)';

const prepared = new WeakMap<Db, Map<string, Statement>>();

/** A rollup statement, prepared once per connection (an import flushes every piece; `usage` reads). */
function statement(db: Db, sql: string, pluck = false): Statement {
  let of = prepared.get(db);
  if (!of) {
    of = new Map();
    prepared.set(db, of);
  }
  let s = of.get(sql);
  if (!s) {
    s = pluck ? db.prepare(sql).pluck() : db.prepare(sql);
    of.set(sql, s);
  }
  return s;
}

/**
 * Hours the rollup does not hold as their rows are: marked by the ledger's triggers when a row is
 * changed or deleted (usage_hours_dirty, by anyone: an older the-loop too), and the hours of rows
 * past the mark (usage_hours_mark: the last row the rollup holds), which only a writer that does not
 * know the rollup leaves there. Empty after every write of this code.
 */
export function pendingHours(db: Db): Set<string> {
  return new Set(statement(db, PENDING, true).all() as string[]);
}

/** Every row is in the rollup: no hour is marked, the mark is the last row. */
function settle(db: Db): void {
  statement(db, CLEAN).run();
  statement(db, MARK).run();
}

/**
 * Rows counted into their hours' buckets as the ledger's writer inserts them, written to
 * `usage_hours` by `flush`. Made in the writer's transaction, before it writes: the hours it finds
 * pending then are computed again at `flush` too.
 */
export class HourTally {
  private readonly buckets = new Buckets();
  private readonly behind: Set<string>;

  constructor(private readonly db: Db) {
    this.behind = pendingHours(db);
  }

  add(r: HourRow): void {
    this.buckets.add(r);
  }

  /**
   * Adds the counted rows to `usage_hours`, but those of hours changed meanwhile (the triggers marked
   * them) or pending before, which are computed again from their rows; then the rollup holds every
   * row (the mark moves to the last). Empties the tally.
   */
  flush(): void {
    const db = this.db;
    const dirty = new Set([...this.behind, ...(statement(db, DIRTY, true).all() as string[])]);
    this.behind.clear();
    addBuckets(db, this.buckets.map.values(), dirty);
    this.buckets.clear();
    if (dirty.size > 0) rebuildHours(db, dirty);
    settle(db);
  }
}

function addBuckets(db: Db, buckets: Iterable<Bucket>, skip: ReadonlySet<string>): void {
  const upsert = statement(db, UPSERT);
  for (const b of buckets) {
    if (skip.has(b.key.hour)) continue;
    const k = b.key;
    upsert.run(
      k.hour,
      k.engine,
      k.model,
      k.payer,
      k.basis,
      k.turn_id,
      b.rows,
      b.input,
      b.output,
      b.cacheRead,
      b.cacheCreation,
      b.reasoning,
      b.priced,
      b.cost,
      b.costErr,
    );
  }
}

/** Rows counted into buckets, apart from any writer (computing hours again). */
function bucketsOf(rows: Iterable<HourRow>, into: Buckets = new Buckets()): Buckets {
  for (const r of rows) into.add(r);
  return into;
}

const ROW_SQL = `SELECT ${HOUR_KEY_SQL}, input_tokens AS input, output_tokens AS output,
  cache_read_tokens AS cache_read, cache_creation_tokens AS cache_creation, reasoning_tokens AS reasoning,
  cost_usd AS cost FROM usage_ledger`;

/**
 * The rows of one hour: found through the `at` index when the hour is printable ASCII (every `at`
 * of the hour lies between it and it with its last character's successor), else by reading the table.
 */
function rowsOfHour(db: Db, hour: string): Iterable<HourRow> {
  if (/^[\x20-\x7e]{1,13}$/.test(hour)) {
    const next = hour.slice(0, -1) + String.fromCharCode(hour.charCodeAt(hour.length - 1) + 1);
    return db
      .prepare(`${ROW_SQL} WHERE at >= ? AND at < ? AND ${HOUR_SQL} = ?`)
      .iterate(hour, next, hour) as Iterable<HourRow>;
  }
  return db.prepare(`${ROW_SQL} WHERE ${HOUR_SQL} = ?`).iterate(hour) as Iterable<HourRow>;
}

/** The hours' rollup rows computed again from their ledger rows (the caller holds the transaction). */
export function rebuildHours(db: Db, hours: Iterable<string>): void {
  const drop = db.prepare('DELETE FROM usage_hours WHERE hour = ?');
  const buckets = new Buckets();
  for (const hour of hours) {
    drop.run(hour);
    bucketsOf(rowsOfHour(db, hour), buckets);
  }
  addBuckets(db, buckets.map.values(), new Set());
}

/** The whole rollup computed from the ledger, holding every row (migration 20 fills it so). */
export function rebuildAllHours(db: Db): void {
  db.prepare('DELETE FROM usage_hours').run();
  addBuckets(db, bucketsOf(db.prepare(ROW_SQL).iterate() as Iterable<HourRow>).map.values(), new Set());
  settle(db);
}
