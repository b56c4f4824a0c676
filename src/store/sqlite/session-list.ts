import type {
  SessionHold,
  SessionStatus,
  SessionTakeover,
  SessionWaiting,
} from '../../core/ports/sessions.js';
import { workItemKey } from '../../core/work-item.js';
import type { SessionListing } from '../../sessions/summary.js';
import type { Db } from '../db.js';

/**
 * `sessions list`'s query (read by the session store's owner, sessions.ts, for `listings`): each
 * session's shown fields and its turns in figures, summed by SQLite. Reading the records and the turns
 * whole made a thousand sessions cost ~25 ms of row objects alone (22 and 26 columns a row) before
 * anything was printed.
 */

export interface SessionFilter {
  workItem?: string;
  status?: SessionStatus;
  limit?: number;
}

/** The WHERE clause (empty when none) and its arguments, for `list` and `listings`. */
export function sessionWhere(filter: SessionFilter): { where: string; args: unknown[] } {
  const where: string[] = [];
  const args: unknown[] = [];
  if (filter.workItem) {
    where.push('work_item = ?');
    args.push(workItemKey(filter.workItem));
  }
  if (filter.status) {
    where.push('status = ?');
    args.push(filter.status);
  }
  return { where: where.length ? `WHERE ${where.join(' AND ')}` : '', args };
}

type ListingRow = [
  id: string,
  workItem: string,
  engine: string,
  runner: string,
  tmuxTarget: string | null,
  status: SessionStatus,
  hold: string | null,
  waiting: string | null,
  takeover: string | null,
  turns: number,
  running: number,
  tokens: number | null,
  lastTurnAt: string | null,
];

/**
 * A turn's tokens as `totalTokens` adds them (a metered turn's missing kinds count 0); NULL for a
 * turn nothing metered, so SUM is NULL for a session none of whose turns was.
 */
const TURN_TOKENS = `t.input_tokens + IFNULL(t.output_tokens, 0) + IFNULL(t.cache_read_tokens, 0)
  + IFNULL(t.cache_creation_tokens, 0) + IFNULL(t.reasoning_tokens, 0)`;

/**
 * Newest first, as `list` orders them; the last turn is the one with the highest seq. The sessions
 * are chosen first (through `sessions_one_active` for the active ones), then their turns are summed:
 * summing by the session key over the whole table read every closed session too (20,000 closed
 * sessions: ~20 ms more).
 */
export function sessionListings(db: Db, filter: SessionFilter): SessionListing[] {
  const { where, args } = sessionWhere(filter);
  const rows = db
    .prepare(
      `WITH s AS (SELECT rowid AS r, id, work_item, engine, runner, tmux_target, status, hold, waiting,
           takeover, created_at FROM sessions ${where} ORDER BY created_at DESC, rowid DESC LIMIT ?)
       SELECT s.id, s.work_item, s.engine, s.runner, s.tmux_target, s.status, s.hold, s.waiting, s.takeover,
         COUNT(t.id), COALESCE(MAX(t.status = 'running'), 0), SUM(${TURN_TOKENS}),
         (SELECT l.started_at FROM turns l WHERE l.session_id = s.id ORDER BY l.seq DESC LIMIT 1)
       FROM s LEFT JOIN turns t ON t.session_id = s.id
       GROUP BY s.r ORDER BY s.created_at DESC, s.r DESC`,
    )
    .raw(true)
    .all(...args, filter.limit ?? 1000) as ListingRow[];
  return rows.map((r) => ({
    id: r[0],
    workItem: r[1],
    engine: r[2],
    runner: r[3],
    tmuxTarget: r[4],
    status: r[5],
    // Parsed as the records' mapper (toSession) parses them; set on few sessions.
    hold: r[6] ? (JSON.parse(r[6]) as SessionHold) : null,
    waiting: r[7] ? (JSON.parse(r[7]) as SessionWaiting) : null,
    takeover: r[8] ? (JSON.parse(r[8]) as SessionTakeover) : null,
    turns: r[9],
    running: r[10] === 1,
    tokens: r[11],
    lastTurnAt: r[12],
  }));
}
