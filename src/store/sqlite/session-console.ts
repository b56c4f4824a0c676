import { LoopError } from '../../core/errors.js';
import type { TurnEvent } from '../../core/events.js';
import type { EventWindow, SessionRecord, SessionTakeover, StoredEvent } from '../../core/ports/sessions.js';
import { takeoverRefusal } from '../../sessions/takeover-rules.js';
import type { Db } from '../db.js';
import { type SessionRow, toSession } from './session-rows.js';

/**
 * The registry's side of what the console asks (part of the sessions' owner, beside sessions.ts):
 * a take over written, and a turn's events after a cursor.
 */

/**
 * Set or clear a session's take over. Read and written under one write lock: of two people taking
 * it over at once, one wins and the other is told who holds it.
 */
export function writeTakeover(
  db: Db,
  id: string,
  takeover: SessionTakeover | null,
  at: string,
): SessionRecord {
  return db
    .transaction(() => {
      const row = db.prepare('SELECT * FROM sessions WHERE id = ?').get(id) as SessionRow | undefined;
      if (!row) throw new LoopError('session-missing', `no session ${id}`);
      const refused = takeover && takeoverRefusal(toSession(row), takeover);
      if (refused) throw refused;
      const value = takeover ? JSON.stringify(takeover) : null;
      db.prepare('UPDATE sessions SET takeover = ?, updated_at = ? WHERE id = ?').run(value, at, id);
      return toSession({ ...row, takeover: value, updated_at: at });
    })
    .immediate();
}

/** Clear a take over only if it is still this one (who and since): one statement, one winner. */
export function endTakeover(
  db: Db,
  id: string,
  held: Pick<SessionTakeover, 'by' | 'since'>,
  at: string,
): boolean {
  const changed = db
    .prepare(
      "UPDATE sessions SET takeover = NULL, updated_at = ? WHERE id = ? AND json_extract(takeover, '$.by') = ? AND json_extract(takeover, '$.since') = ?",
    )
    .run(at, id, held.by, held.since).changes;
  return changed === 1;
}

/**
 * A turn's events after `seq`, in order, at most `limit`; or its `last` ones, in order (the primary
 * key serves both ranges: a live view never reads a long turn whole).
 */
export function readEventWindow(db: Db, turnId: number, window: EventWindow): StoredEvent[] {
  const rows = (
    'last' in window
      ? db
          .prepare(
            'SELECT * FROM (SELECT * FROM turn_events WHERE turn_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq',
          )
          .all(turnId, Math.max(0, Math.floor(window.last)))
      : db
          .prepare('SELECT * FROM turn_events WHERE turn_id = ? AND seq > ? ORDER BY seq LIMIT ?')
          .all(turnId, window.seq, Math.max(0, Math.floor(window.limit)))
  ) as { turn_id: number; seq: number; at: string; data: string }[];
  return rows.map((r) => ({
    turnId: r.turn_id,
    seq: r.seq,
    at: r.at,
    event: JSON.parse(r.data) as TurnEvent,
  }));
}
