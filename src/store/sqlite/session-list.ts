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

/**
 * The WHERE clause (empty when none) and its arguments, for `list` and `listings`; `table` qualifies
 * the columns (`s.`) where a join could make them ambiguous.
 */
export function sessionWhere(filter: SessionFilter, table = ''): { where: string; args: unknown[] } {
  const where: string[] = [];
  const args: unknown[] = [];
  if (filter.workItem) {
    where.push(`${table}work_item = ?`);
    args.push(workItemKey(filter.workItem));
  }
  if (filter.status) {
    where.push(`${table}status = ?`);
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
  lastSeq: number | null,
  lastTurnAt: string | null,
];

/**
 * A turn's tokens as `totalTokens` adds them (a metered turn's missing kinds count 0); NULL for a
 * turn nothing metered, so SUM is NULL for a session none of whose turns was.
 */
const TURN_TOKENS = `t.input_tokens + IFNULL(t.output_tokens, 0) + IFNULL(t.cache_read_tokens, 0)
  + IFNULL(t.cache_creation_tokens, 0) + IFNULL(t.reasoning_tokens, 0)`;

/**
 * Newest first, as `list` orders them; the last turn is the one with the highest seq: its
 * `started_at` is a bare column beside the query's only max() aggregate, which SQLite takes from the
 * row holding that maximum (documented: "Bare columns in an aggregate query"), so no subquery runs
 * per session — `running` is a SUM for that reason. Grouped by
 * (created_at, rowid), the order the sessions are read in: the active ones come out of
 * `sessions_active_created` newest first and their turns are summed as they come, with no temporary
 * B-tree (the sessions chosen first, sorted, grouped and sorted again cost ~20M instructions more on
 * 1,000 active sessions). A filter's LIMIT applies to sessions: one group is one session.
 */
export function listingQuery(filter: SessionFilter): { sql: string; args: unknown[] } {
  const { where, args } = sessionWhere(filter, 's.');
  return {
    sql: `SELECT s.id, s.work_item, s.engine, s.runner, s.tmux_target, s.status, s.hold, s.waiting, s.takeover,
         COUNT(t.id), COALESCE(SUM(t.status = 'running'), 0) > 0, SUM(${TURN_TOKENS}),
         MAX(t.seq), t.started_at
       FROM sessions s LEFT JOIN turns t ON t.session_id = s.id ${where}
       GROUP BY s.created_at, s.rowid ORDER BY s.created_at DESC, s.rowid DESC LIMIT ?`,
    args: [...args, filter.limit ?? 1000],
  };
}

/** The listings of the sessions `filter` chooses, newest first (see `listingQuery`). */
export function sessionListings(db: Db, filter: SessionFilter): SessionListing[] {
  const { sql, args } = listingQuery(filter);
  const rows = db
    .prepare(sql)
    .raw(true)
    .all(...args) as ListingRow[];
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
    lastTurnAt: r[13],
  }));
}
