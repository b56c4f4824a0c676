import type {
  ActFilter,
  ActOutcome,
  ActRecord,
  ActSource,
  ActStore,
  ActTurn,
  NewAct,
} from '../../core/ports/acts.js';
import type { Db } from '../db.js';

/**
 * The acts table: its only reader and writer. Every text an act carries (the command, its detail)
 * passes through `scrub` before it is stored. `Kind` and `Detail` are the acts module's vocabulary,
 * kept as written (the detail as JSON).
 */

interface ActRow {
  id: number;
  turn_id: number;
  turn_seq: number | null;
  source: ActSource;
  session_id: string;
  work_item: string;
  engine: string;
  runner: string;
  seq: number;
  tool_use_id: string | null;
  tool: string;
  kind: string;
  command: string;
  detail: string;
  evasion: string | null;
  outcome: ActOutcome;
  verdict: 'allow' | 'deny';
  rule: string | null;
  breach: number;
  at: string;
}

const INSERT = `INSERT INTO acts (turn_id, turn_seq, session_id, work_item, engine, runner, source, seq, tool_use_id,
     tool, kind, command, detail, evasion, outcome, verdict, rule, breach, at)
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
    const { scrub } = this.options;
    for (const a of acts) {
      insert.run(
        turn.id,
        turn.seq,
        turn.sessionId,
        turn.workItem,
        turn.engine,
        turn.runner,
        source,
        a.seq,
        a.toolUseId,
        a.tool.slice(0, 200),
        a.kind,
        scrub(a.command),
        scrub(JSON.stringify(a.detail)),
        a.evasion ?? null,
        a.outcome,
        a.verdict,
        a.rule,
        a.breach ? 1 : 0,
        turn.at,
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
    const where: string[] = [];
    const args: Record<string, unknown> = {};
    const add = (clause: string, name: string, value: unknown) => {
      where.push(clause);
      args[name] = value;
    };
    if (filter.workItem) add('work_item = @workItem', 'workItem', filter.workItem);
    if (filter.sessionId) add('session_id = @sessionId', 'sessionId', filter.sessionId);
    if (filter.kind) add('kind = @kind', 'kind', filter.kind);
    if (filter.since) add('at >= @since', 'since', filter.since.toISOString());
    if (filter.turnId !== undefined) add('turn_id = @turnId', 'turnId', filter.turnId);
    if (filter.breachesOnly) where.push('breach = 1');
    const rows = this.db
      .prepare(
        `SELECT * FROM acts ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY at DESC, id DESC LIMIT @limit`,
      )
      .all({ ...args, limit: filter.limit ?? 1000 }) as ActRow[];
    return rows.map((r) => this.toRecord(r));
  }

  private toRecord(r: ActRow): ActRecord<Kind, Detail> {
    return {
      id: r.id,
      turnId: r.turn_id,
      turnSeq: r.turn_seq,
      source: r.source,
      sessionId: r.session_id,
      workItem: r.work_item,
      engine: r.engine,
      runner: r.runner,
      seq: r.seq,
      toolUseId: r.tool_use_id,
      tool: r.tool,
      kind: r.kind as Kind,
      command: r.command,
      detail: JSON.parse(r.detail) as Detail,
      evasion: r.evasion,
      outcome: r.outcome,
      verdict: r.verdict,
      rule: r.rule,
      breach: r.breach === 1,
      at: r.at,
    };
  }
}
