import type { ActFilter, ActRecord, ActSource, ActStore, ActTurn, NewAct } from '../../core/ports/acts.js';
import {
  ACTS_LIMIT,
  type ActRow,
  actConditions,
  actTurnValues,
  storedAct,
  toActRecord,
} from '../acts-rows.js';
import type { Db } from '../db.js';
import { whereOf } from '../filters.js';

/**
 * The acts table: its only reader and writer. Every text an act carries (the command, its detail)
 * passes through `scrub` before it is stored. `Kind` and `Detail` are the acts module's vocabulary,
 * kept as written (the detail as JSON). The rows, what an act stores and a list's conditions are the
 * PostgreSQL store's too (store/acts-rows.ts).
 */

const INSERT = `INSERT INTO acts (turn_id, turn_seq, session_id, work_item, engine, runner, source, at, seq,
     tool_use_id, tool, kind, command, detail, evasion, outcome, verdict, rule, breach)
   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
   ON CONFLICT (turn_id, source, seq) DO NOTHING`;

export class SqliteActStore<Kind extends string = string, Detail = unknown>
  implements ActStore<Kind, Detail>
{
  constructor(
    private readonly db: Db,
    private readonly options: { scrub: (text: string) => string },
  ) {}

  private insert(turn: ActTurn, acts: readonly NewAct<Kind, Detail>[], source: ActSource): void {
    const insert = this.db.prepare(INSERT);
    const columns = actTurnValues(turn, source);
    for (const act of acts) {
      const a = storedAct(act, this.options.scrub);
      insert.run(
        ...columns,
        a.seq,
        a.tool_use_id,
        a.tool,
        a.kind,
        a.command,
        a.detail,
        a.evasion,
        a.outcome,
        a.verdict,
        a.rule,
        a.breach,
      );
    }
  }

  async save(turn: ActTurn, acts: readonly NewAct<Kind, Detail>[], source: ActSource): Promise<void> {
    this.db.transaction(() => this.insert(turn, acts, source))();
  }

  async saveWire(turn: ActTurn, act: Omit<NewAct<Kind, Detail>, 'seq'>): Promise<void> {
    // IMMEDIATE: the write lock is taken before MAX(seq) is read, so two processes recording acts of
    // one turn wait for each other (busy_timeout) instead of one failing with SQLITE_BUSY.
    this.db
      .transaction(() => {
        const max = this.db
          .prepare("SELECT MAX(seq) FROM acts WHERE turn_id = ? AND source = 'wire'")
          .pluck()
          .get(turn.id) as number | null;
        this.insert(turn, [{ ...act, seq: (max ?? 0) + 1 } as NewAct<Kind, Detail>], 'wire');
      })
      .immediate();
  }

  async list(filter: ActFilter<Kind> = {}): Promise<ActRecord<Kind, Detail>[]> {
    const { where, values } = whereOf(actConditions(filter), () => '?');
    const rows = this.db
      .prepare(`SELECT * FROM acts ${where} ORDER BY at DESC, id DESC LIMIT ?`)
      .all(...values, filter.limit ?? ACTS_LIMIT) as ActRow[];
    return rows.map((r) => toActRecord<Kind, Detail>(r));
  }
}
