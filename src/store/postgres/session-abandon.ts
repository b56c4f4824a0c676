/**
 * What recovery after a host's death (abandon.ts) does to the session store's tables, on the
 * caller's transaction: the dead host's running turns interrupted (each with its unmetered drive),
 * the newest turn of each delivery read, and the sessions whose terminal was on that host lost.
 */

import type { Abandoned } from '../../core/ports/hosts.js';
import type { EndReason, InterruptedHold, TurnStatus } from '../../core/ports/sessions.js';
import { insertUnmeteredDrive } from './ledger-shared.js';
import type { Queryable } from './pg.js';

export interface InterruptedTurn {
  turnId: number;
  deliveryId: string | null;
  sessionId: string;
  runner: string;
}

/**
 * The running turns the dead host began on the work item (under that epoch or an earlier one: a
 * later epoch's turn is a new holding's) → failed, `interrupted`, with `error`; what they used was
 * not measured, so each gets an unmetered drive, as a lost turn does. A turn already ended (or
 * interrupted by an earlier call) is left as it is.
 */
export async function interruptHostTurns(
  q: Queryable,
  abandoned: Abandoned,
  at: string,
  error: string,
): Promise<InterruptedTurn[]> {
  const rows = await q.rows<{
    id: number;
    delivery_id: string | null;
    session_id: string;
    work_item: string;
    engine: string;
    runner: string;
  }>(
    `UPDATE turns t SET status = 'failed', end_reason = 'interrupted', ended_at = $4, error = $5
       FROM sessions s
      WHERE s.id = t.session_id AND s.work_item = $1 AND t.host_id = $2 AND t.epoch <= $3::bigint
        AND t.status = 'running'
     RETURNING t.id, t.delivery_id, s.id AS session_id, s.work_item, s.engine, s.runner`,
    [abandoned.workItem, abandoned.hostId, abandoned.epoch, at, error],
  );
  rows.sort((a, b) => a.id - b.id);
  for (const r of rows) {
    await insertUnmeteredDrive(q, {
      at,
      sessionId: r.session_id,
      workItem: r.work_item,
      turnId: r.id,
      engine: r.engine,
      runner: r.runner,
      reason: `interrupted: ${error}`,
    });
  }
  return rows.map((r) => ({
    turnId: r.id,
    deliveryId: r.delivery_id,
    sessionId: r.session_id,
    runner: r.runner,
  }));
}

/**
 * Hold each active process-runner session whose turn was interrupted (its deliveries wait for a
 * person's resume, `store.onHostLoss: hold`); a session already held keeps its hold. Returns the
 * sessions held.
 */
export async function holdInterrupted(
  q: Queryable,
  interrupted: readonly InterruptedTurn[],
  abandoned: Abandoned,
  at: string,
): Promise<string[]> {
  const held: string[] = [];
  for (const t of interrupted) {
    if (t.runner === 'tmux') continue;
    const hold: InterruptedHold = {
      kind: 'interrupted',
      reason: `host ${abandoned.hostId} died during turn ${t.turnId}`,
      turnId: t.turnId,
      hostId: abandoned.hostId,
      since: at,
    };
    const n = await q.run(
      `UPDATE sessions SET hold = $2, updated_at = $3 WHERE id = $1 AND status = 'active' AND hold IS NULL`,
      [t.sessionId, JSON.stringify(hold), at],
    );
    if (n > 0) held.push(t.sessionId);
  }
  return held;
}

export interface NewestTurn {
  id: number;
  status: TurnStatus;
  endReason: EndReason | null;
  error: string | null;
}

/** The newest turn run for each delivery named (none: it never began one). */
export async function newestTurns(
  q: Queryable,
  deliveryIds: readonly string[],
): Promise<Map<string, NewestTurn>> {
  const of = new Map<string, NewestTurn>();
  if (deliveryIds.length === 0) return of;
  const rows = await q.rows<{
    delivery_id: string;
    id: number;
    status: TurnStatus;
    end_reason: EndReason | null;
    error: string | null;
  }>(
    `SELECT DISTINCT ON (delivery_id) delivery_id, id, status, end_reason, error FROM turns
      WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id, id DESC`,
    [[...deliveryIds]],
  );
  for (const r of rows)
    of.set(r.delivery_id, { id: r.id, status: r.status, endReason: r.end_reason, error: r.error });
  return of;
}

/**
 * Active tmux sessions whose terminal was on the dead host → `lost`: those named (sessions of its
 * interrupted turns), and, when `wholeWorkItem`, every active tmux session of the work item (no
 * other host has held it since). A process-runner session stays active: it can move.
 */
export async function loseTmuxSessions(
  q: Queryable,
  workItem: string,
  sessionIds: readonly string[],
  wholeWorkItem: boolean,
  at: string,
  reason: string,
): Promise<string[]> {
  const rows = await q.rows<{ id: string }>(
    `UPDATE sessions SET status = 'lost', closed_at = $1, close_reason = $2, updated_at = $1
      WHERE status = 'active' AND runner = 'tmux'
        AND (id = ANY($3::text[]) OR ($4::boolean AND work_item = $5::text))
     RETURNING id`,
    [at, reason, [...sessionIds], wholeWorkItem, workItem],
  );
  return rows.map((r) => r.id).sort();
}
