/**
 * The registry's side of what the console asks (part of the sessions' owner, beside sessions.ts),
 * on PostgreSQL: a take over written, and ended once.
 */
import { LoopError } from '../../core/errors.js';
import type { SessionRecord, SessionTakeover } from '../../core/ports/sessions.js';
import { takeoverRefusal } from '../../sessions/takeover-rules.js';
import { type SessionRow, toSession } from '../sqlite/session-rows.js';
import type { Pg } from './pg.js';

/**
 * Set or clear a session's take over. Read and written with the session's row locked: of two people
 * taking it over at once, one wins and the other, waiting on the lock, is told who holds it.
 */
export async function writeTakeover(
  db: Pg,
  id: string,
  takeover: SessionTakeover | null,
  at: string,
): Promise<SessionRecord> {
  return db.tx(async (q) => {
    const row = await q.row<SessionRow>('SELECT * FROM sessions WHERE id = $1 FOR UPDATE', [id]);
    if (!row) throw new LoopError('session-missing', `no session ${id}`);
    const refused = takeover && takeoverRefusal(toSession(row), takeover);
    if (refused) throw refused;
    const written = await q.row<SessionRow>(
      'UPDATE sessions SET takeover = $1, updated_at = $2 WHERE id = $3 RETURNING *',
      [takeover ? JSON.stringify(takeover) : null, at, id],
    );
    return toSession(written as SessionRow);
  });
}

/**
 * Clear a take over only if it is still this one (who and since): one statement, one winner (a
 * second caller waits on the row, then finds the condition false on the row as the first left it).
 */
export async function endTakeover(
  db: Pg,
  id: string,
  held: Pick<SessionTakeover, 'by' | 'since'>,
  at: string,
): Promise<boolean> {
  const changed = await db.run(
    `UPDATE sessions SET takeover = NULL, updated_at = $1
      WHERE id = $2 AND takeover IS NOT NULL
        AND (takeover::jsonb ->> 'by') = $3 AND (takeover::jsonb ->> 'since') = $4`,
    [at, id, held.by, held.since],
  );
  return changed === 1;
}
