/**
 * `sessions list`'s query on PostgreSQL (read by the session store, sessions.ts, for `listings`):
 * each session's shown fields and its turns in figures, summed by PostgreSQL, in `list`'s order.
 */
import type {
  SessionHold,
  SessionStatus,
  SessionTakeover,
  SessionWaiting,
} from '../../core/ports/sessions.js';
import { workItemKey } from '../../core/work-item.js';
import type { SessionListing } from '../../sessions/summary.js';
import type { Queryable } from './pg.js';

export interface SessionFilter {
  workItem?: string;
  status?: SessionStatus;
  limit?: number;
}

/**
 * The WHERE clause (empty when none) and its values ($1, $2 … in order), for `list` and `listings`;
 * `table` qualifies the columns (`s.`) where a join could make them ambiguous. The text varies only
 * in which conditions it has, never with the values.
 */
export function sessionWhere(filter: SessionFilter, table = ''): { where: string; args: unknown[] } {
  const where: string[] = [];
  const args: unknown[] = [];
  if (filter.workItem) {
    args.push(workItemKey(filter.workItem));
    where.push(`${table}work_item = $${args.length}`);
  }
  if (filter.status) {
    args.push(filter.status);
    where.push(`${table}status = $${args.length}`);
  }
  return { where: where.length ? `WHERE ${where.join(' AND ')}` : '', args };
}

/** The sessions `filter` chooses, newest first (`created_seq` breaks ties as SQLite's rowid does). */
export function listQuery(filter: SessionFilter): { sql: string; args: unknown[] } {
  const { where, args } = sessionWhere(filter);
  return {
    sql: `SELECT * FROM sessions ${where} ORDER BY created_at DESC, created_seq DESC LIMIT $${args.length + 1}`,
    args: [...args, filter.limit ?? 1000],
  };
}

interface ListingRow {
  id: string;
  work_item: string;
  engine: string;
  runner: string;
  tmux_target: string | null;
  status: SessionStatus;
  hold: string | null;
  waiting: string | null;
  takeover: string | null;
  turns: number;
  running: boolean;
  tokens: number | null;
  last_turn_at: string | null;
}

/**
 * A turn's tokens as `totalTokens` adds them (a metered turn's missing kinds count 0); NULL for a
 * turn nothing metered, so SUM is NULL for a session none of whose turns was.
 */
const TURN_TOKENS = `t.input_tokens + COALESCE(t.output_tokens, 0) + COALESCE(t.cache_read_tokens, 0)
  + COALESCE(t.cache_creation_tokens, 0) + COALESCE(t.reasoning_tokens, 0)`;

/**
 * Newest first, as `list` orders them; the last turn is the one with the highest seq (its start
 * taken by an ordered aggregate). A filter's LIMIT applies to sessions: one group is one session.
 */
export function listingQuery(filter: SessionFilter): { sql: string; args: unknown[] } {
  const { where, args } = sessionWhere(filter, 's.');
  return {
    sql: `SELECT s.id, s.work_item, s.engine, s.runner, s.tmux_target, s.status, s.hold, s.waiting, s.takeover,
         COUNT(t.id) AS turns, COALESCE(bool_or(t.status = 'running'), false) AS running,
         SUM(${TURN_TOKENS}) AS tokens,
         (array_agg(t.started_at ORDER BY t.seq DESC))[1] AS last_turn_at
       FROM sessions s LEFT JOIN turns t ON t.session_id = s.id ${where}
       GROUP BY s.id ORDER BY s.created_at DESC, s.created_seq DESC LIMIT $${args.length + 1}`,
    args: [...args, filter.limit ?? 1000],
  };
}

/** The listings of the sessions `filter` chooses, newest first (see `listingQuery`). */
export async function sessionListings(q: Queryable, filter: SessionFilter): Promise<SessionListing[]> {
  const { sql, args } = listingQuery(filter);
  const rows = await q.rows<ListingRow>(sql, args);
  return rows.map((r) => ({
    id: r.id,
    workItem: r.work_item,
    engine: r.engine,
    runner: r.runner,
    tmuxTarget: r.tmux_target,
    status: r.status,
    // Parsed as the records' mapper (toSession) parses them; set on few sessions.
    hold: r.hold ? (JSON.parse(r.hold) as SessionHold) : null,
    waiting: r.waiting ? (JSON.parse(r.waiting) as SessionWaiting) : null,
    takeover: r.takeover ? (JSON.parse(r.takeover) as SessionTakeover) : null,
    turns: r.turns,
    running: r.running,
    tokens: r.tokens,
    lastTurnAt: r.last_turn_at,
  }));
}
