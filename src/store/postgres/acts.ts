import type { ActFilter, ActRecord, ActSource, ActStore, ActTurn, NewAct } from '../../core/ports/acts.js';
import {
  ACTS_LIMIT,
  type ActRow,
  actConditions,
  actTurnValues,
  type StoredAct,
  storedAct,
  toActRecord,
} from '../acts-rows.js';
import { whereOf } from '../filters.js';
import { noNul } from '../text.js';
import type { Pg } from './pg.js';

/**
 * The acts table on PostgreSQL: its only reader and writer, as store/sqlite/acts.ts (its rows,
 * what an act stores and a list's conditions are store/acts-rows.ts). Every text an
 * act carries (the command, its detail) passes through `scrub` before it is stored. `Kind` and
 * `Detail` are the acts module's vocabulary, kept as written (the detail as JSON).
 *
 * Two hosts recording wire acts of one turn at once: each transaction first locks the turn's row
 * (`FOR NO KEY UPDATE`), then reads the turn's highest wire `seq` and inserts the next. The second
 * waits on the lock until the first commits, and its read, a new statement under READ COMMITTED,
 * then sees the first one's act: the numbers run 1..n without a gap or a repeat. The turn's row is
 * the lock because it is the one thing every wire act of the turn shares (an empty turn has no act
 * row to lock); `NO KEY UPDATE` leaves the key-share lock the acts' foreign key takes free, so
 * other inserts naming the turn are not held up, and the lock is gone at commit.
 */

/** A turn's acts of one source in one statement: the turn's columns once, the acts' as arrays. */
const INSERT = `INSERT INTO acts (turn_id, turn_seq, session_id, work_item, engine, runner, source, at, seq,
     tool_use_id, tool, kind, command, detail, evasion, outcome, verdict, rule, breach)
   SELECT $1::bigint, $2::bigint, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, a.seq,
       a.tool_use_id, a.tool, a.kind, a.command, a.detail, a.evasion, a.outcome, a.verdict, a.rule, a.breach
     FROM unnest($9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
       $16::text[], $17::text[], $18::text[], $19::bigint[]) WITH ORDINALITY
       AS a (seq, tool_use_id, tool, kind, command, detail, evasion, outcome, verdict, rule, breach, n)
     ORDER BY a.n
   ON CONFLICT (turn_id, source, seq) DO NOTHING`;

/** The lock every writer of a turn's wire acts takes first (see above). */
const LOCK_TURN = 'SELECT id FROM turns WHERE id = $1 FOR NO KEY UPDATE';

const NEXT_WIRE_SEQ =
  "SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM acts WHERE turn_id = $1 AND source = 'wire'";

export class PgActStore<Kind extends string = string, Detail = unknown> implements ActStore<Kind, Detail> {
  constructor(
    private readonly db: Pg,
    private readonly options: { scrub: (text: string) => string },
  ) {}

  /** The acts, as INSERT's values: a turn's columns, then one array per act column. */
  private values(turn: ActTurn, acts: readonly NewAct<Kind, Detail>[], source: ActSource): unknown[] {
    const stored = acts.map((a) => storedAct(a, this.options.scrub, noNul));
    const column = <T>(pick: (a: StoredAct) => T): T[] => stored.map(pick);
    return [
      ...actTurnValues(turn, source),
      column((a) => a.seq),
      column((a) => a.tool_use_id),
      column((a) => a.tool),
      column((a) => a.kind),
      column((a) => a.command),
      column((a) => a.detail),
      column((a) => a.evasion),
      column((a) => a.outcome),
      column((a) => a.verdict),
      column((a) => a.rule),
      column((a) => a.breach),
    ];
  }

  async save(turn: ActTurn, acts: readonly NewAct<Kind, Detail>[], source: ActSource): Promise<void> {
    if (acts.length === 0) return;
    const values = this.values(turn, acts, source);
    // In a transaction, so a deadlock (two hosts saving one turn's acts in different orders) is
    // run again rather than failed. Wire acts given their numbers still take the turn's lock, so
    // saveWire never numbers one after a MAX(seq) read while these are uncommitted (its insert
    // would then be dropped as a repeat).
    await this.db.tx(async (q) => {
      if (source === 'wire') await q.run(LOCK_TURN, [turn.id]);
      await q.run(INSERT, values);
    });
  }

  async saveWire(turn: ActTurn, act: Omit<NewAct<Kind, Detail>, 'seq'>): Promise<void> {
    await this.db.tx(async (q) => {
      await q.run(LOCK_TURN, [turn.id]);
      const next = await q.row<{ seq: number }>(NEXT_WIRE_SEQ, [turn.id]);
      const numbered = { ...act, seq: next?.seq ?? 1 } as NewAct<Kind, Detail>;
      await q.run(INSERT, this.values(turn, [numbered], 'wire'));
    });
  }

  async list(filter: ActFilter<Kind> = {}): Promise<ActRecord<Kind, Detail>[]> {
    const { where, values } = whereOf(actConditions(filter), (n) => `$${n}`);
    // As SQLite's LIMIT: a negative limit is none (PostgreSQL's LIMIT NULL).
    const limit = filter.limit ?? ACTS_LIMIT;
    values.push(limit < 0 ? null : limit);
    const rows = await this.db.rows<ActRow>(
      `SELECT * FROM acts ${where} ORDER BY at DESC, id DESC LIMIT $${values.length}`,
      values,
    );
    return rows.map((r) => toActRecord<Kind, Detail>(r));
  }
}
