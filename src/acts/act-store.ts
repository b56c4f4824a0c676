import type { Db } from '../store/db.js';
import type { ActDetail, ActKind } from './types.js';

/**
 * The acts table: its only reader and writer. Acts come from two sources: the turn's tool uses,
 * classified after the turn (`command`: best effort), and the gateway, which saw the ref update or
 * the API call itself (`wire`: its outcome is certain). Each source numbers its acts within a turn.
 */
export type ActOutcome = 'succeeded' | 'failed' | 'blocked' | 'unknown';

/** An act ready to store: what the audit settled, or what the gateway saw. */
export interface NewAct {
  seq: number;
  toolUseId: string | null;
  tool: string;
  kind: ActKind;
  command: string;
  detail: ActDetail;
  evasion?: string | undefined;
  outcome: ActOutcome;
  verdict: 'allow' | 'deny';
  rule: string | null;
  breach: boolean;
}

export interface ActRecord {
  id: number;
  turnId: number;
  turnSeq: number | null;
  /** `command`: found in the turn's tool uses (best effort); `wire`: seen by the gateway (certain). */
  source: 'command' | 'wire';
  sessionId: string;
  workItem: string;
  engine: string;
  runner: string;
  seq: number;
  toolUseId: string | null;
  tool: string;
  kind: ActKind;
  command: string;
  detail: ActDetail;
  evasion: string | null;
  outcome: ActOutcome;
  verdict: 'allow' | 'deny';
  rule: string | null;
  breach: boolean;
  at: string;
}

interface ActRow {
  id: number;
  turn_id: number;
  turn_seq: number | null;
  source: 'command' | 'wire';
  session_id: string;
  work_item: string;
  engine: string;
  runner: string;
  seq: number;
  tool_use_id: string | null;
  tool: string;
  kind: ActKind;
  command: string;
  detail: string;
  evasion: string | null;
  outcome: ActOutcome;
  verdict: 'allow' | 'deny';
  rule: string | null;
  breach: number;
  at: string;
}

const toRecord = (r: ActRow): ActRecord => ({
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
  kind: r.kind,
  command: r.command,
  detail: JSON.parse(r.detail) as ActDetail,
  evasion: r.evasion,
  outcome: r.outcome,
  verdict: r.verdict,
  rule: r.rule,
  breach: r.breach === 1,
  at: r.at,
});

/** Store a turn's acts (idempotent per turn and position). Text passes through `scrub` first. */
export function saveActs(
  db: Db,
  turn: { id: number; sessionId: string; workItem: string; engine: string; runner: string; at: string },
  acts: readonly NewAct[],
  scrub: (text: string) => string,
  source: 'command' | 'wire' = 'command',
): void {
  const insert = db.prepare(
    `INSERT INTO acts (turn_id, session_id, work_item, engine, runner, source, seq, tool_use_id, tool, kind,
       command, detail, evasion, outcome, verdict, rule, breach, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (turn_id, source, seq) DO NOTHING`,
  );
  db.transaction(() => {
    for (const a of acts) {
      insert.run(
        turn.id,
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
  })();
}

export interface ActFilter {
  workItem?: string | undefined;
  sessionId?: string | undefined;
  kind?: ActKind | undefined;
  since?: Date | undefined;
  turnId?: number | undefined;
  breachesOnly?: boolean | undefined;
  limit?: number | undefined;
}

export function listActs(db: Db, filter: ActFilter = {}): ActRecord[] {
  const where: string[] = [];
  const args: Record<string, unknown> = {};
  if (filter.workItem) {
    where.push('a.work_item = @workItem');
    args.workItem = filter.workItem;
  }
  if (filter.sessionId) {
    where.push('a.session_id = @sessionId');
    args.sessionId = filter.sessionId;
  }
  if (filter.kind) {
    where.push('a.kind = @kind');
    args.kind = filter.kind;
  }
  if (filter.since) {
    where.push('a.at >= @since');
    args.since = filter.since.toISOString();
  }
  if (filter.turnId !== undefined) {
    where.push('a.turn_id = @turnId');
    args.turnId = filter.turnId;
  }
  if (filter.breachesOnly) where.push('a.breach = 1');
  const rows = db
    .prepare(
      `SELECT a.*, t.seq AS turn_seq FROM acts a LEFT JOIN turns t ON t.id = a.turn_id
       ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY a.at DESC, a.id DESC LIMIT @limit`,
    )
    .all({ ...args, limit: filter.limit ?? 1000 }) as ActRow[];
  return rows.map(toRecord);
}

/** The next number of a wire act in a turn (the gateway records acts one at a time, as they happen). */
export function nextWireSeq(db: Db, turnId: number): number {
  const max = db
    .prepare("SELECT MAX(seq) FROM acts WHERE turn_id = ? AND source = 'wire'")
    .pluck()
    .get(turnId) as number | null;
  return (max ?? 0) + 1;
}
