import type { ActFilter, ActOutcome, ActRecord, ActSource, ActTurn, NewAct } from '../core/ports/acts.js';
import type { Condition } from './filters.js';

/**
 * The acts table's rows as both stores (store/sqlite/acts.ts, store/postgres/acts.ts) read and write
 * them: the row, its record, what an act stores (scrubbed and bounded), and a list's conditions.
 */

export interface ActRow {
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

/** An act's own columns as stored (the row's, less the turn's and the id). */
export type StoredAct = Omit<
  ActRow,
  'id' | 'turn_id' | 'turn_seq' | 'source' | 'session_id' | 'work_item' | 'engine' | 'runner' | 'at'
>;

/**
 * The turn's columns of its acts' rows, in both INSERTs' order: turn_id, turn_seq, session_id,
 * work_item, engine, runner, source, at.
 */
export const actTurnValues = (turn: ActTurn, source: ActSource): unknown[] => [
  turn.id,
  turn.seq,
  turn.sessionId,
  turn.workItem,
  turn.engine,
  turn.runner,
  source,
  turn.at,
];

/**
 * What an act stores: the tool's name bounded, the command and the detail (as JSON) scrubbed. `text`
 * finishes each of those three texts (PostgreSQL's takes out NUL; SQLite keeps them as they are).
 */
export function storedAct<Kind extends string, Detail>(
  a: NewAct<Kind, Detail>,
  scrub: (text: string) => string,
  text: (value: string) => string = (value) => value,
): StoredAct {
  return {
    seq: a.seq,
    tool_use_id: a.toolUseId,
    tool: text(a.tool.slice(0, 200)),
    kind: a.kind,
    command: text(scrub(a.command)),
    detail: text(scrub(JSON.stringify(a.detail))),
    evasion: a.evasion ?? null,
    outcome: a.outcome,
    verdict: a.verdict,
    rule: a.rule,
    breach: a.breach ? 1 : 0,
  };
}

/** The acts one `list` returns when it names no limit. */
export const ACTS_LIMIT = 1000;

/** A list's conditions, in the order both stores bind them. */
export function actConditions<Kind extends string>(filter: ActFilter<Kind>): Condition[] {
  const out: Condition[] = [];
  if (filter.workItem) out.push({ column: 'work_item', op: '=', value: filter.workItem });
  if (filter.sessionId) out.push({ column: 'session_id', op: '=', value: filter.sessionId });
  if (filter.kind) out.push({ column: 'kind', op: '=', value: filter.kind });
  if (filter.since) out.push({ column: 'at', op: '>=', value: filter.since.toISOString() });
  if (filter.turnId !== undefined) out.push({ column: 'turn_id', op: '=', value: filter.turnId });
  if (filter.breachesOnly) out.push({ sql: 'breach = 1' });
  return out;
}

export function toActRecord<Kind extends string, Detail>(r: ActRow): ActRecord<Kind, Detail> {
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
