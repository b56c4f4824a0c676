/**
 * The turn side of the PostgreSQL session store (the owner of `turns` and `turn_events`), and what
 * other stores read of turns through it. Plain functions of a connection; `PgSessionStore`
 * (sessions.ts) delegates here.
 */
import { LoopError } from '../../core/errors.js';
import type { TurnEvent } from '../../core/events.js';
import type { StoredEvent, TurnEnd, TurnRecord } from '../../core/ports/sessions.js';
import { type TurnRow, toTurn } from '../sqlite/session-rows.js';
import { insertUnmeteredDrive } from './ledger-shared.js';
import type { Pg, Queryable } from './pg.js';
import { hostScope, turnFenceHolds } from './session-fence.js';

/** Turns begun since `since` (ISO) by one session, or by every session of one work item: the budgets' count. */
export async function countTurns(
  q: Queryable,
  scope: 'session' | 'work-item',
  key: string,
  since: string,
): Promise<number> {
  const which =
    scope === 'session' ? 'session_id = $1' : 'session_id IN (SELECT id FROM sessions WHERE work_item = $1)';
  const row = await q.row<{ n: number }>(
    `SELECT COUNT(*) AS n FROM turns WHERE ${which} AND started_at >= $2`,
    [key, since],
  );
  return row?.n ?? 0;
}

/** The SQLSTATE of a failed query, and the constraint it violated (if any). */
export function pgError(error: unknown): { code?: string; constraint?: string } {
  if (typeof error !== 'object' || error === null) return {};
  const e = error as { code?: unknown; constraint?: unknown };
  return {
    ...(typeof e.code === 'string' ? { code: e.code } : {}),
    ...(typeof e.constraint === 'string' ? { constraint: e.constraint } : {}),
  };
}

/** A unique violation (23505), of the index named when one is. */
export function isUniqueViolation(error: unknown, index?: string): boolean {
  const e = pgError(error);
  return e.code === '23505' && (index === undefined || e.constraint === index);
}

/**
 * A turn write's condition (turn id $1, writing host $5): not a turn whose recorded lease is stale,
 * nor another host's (session-fence.ts). A turn that does not exist is neither: its write fails as
 * it always did.
 */
const STALE_TURN = `NOT EXISTS (SELECT 1 FROM turns ft WHERE ft.id = $1 AND NOT ${turnFenceHolds('ft', '$5')})`;

/** Record the engine's pid, unless the turn is fenced (session-fence.ts; then nothing changes). */
export async function setTurnPid(
  q: Queryable,
  turnId: number,
  pid: number,
  host: string | null = null,
): Promise<number> {
  return q.run(`UPDATE turns SET pid = $2 WHERE id = $1 AND ${turnFenceHolds('turns', '$3')}`, [
    turnId,
    pid,
    host,
  ]);
}

/**
 * Store one event as the turn's next (nothing when the turn's lease is stale) (`data` is its JSON, already scrubbed): its seq is computed in
 * the insert (the highest stored + 1, so none is skipped); an insert that lost a race for that seq
 * (another host appending to the same turn, which happens only around an adoption) computes it
 * again.
 */
export async function appendTurnEvent(
  q: Queryable,
  turnId: number,
  at: string,
  event: TurnEvent,
  data: string,
  host: string | null = null,
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await q.run(
        `INSERT INTO turn_events (turn_id, seq, at, type, data)
           SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM turn_events WHERE turn_id = $1
           HAVING ${STALE_TURN}`,
        [turnId, at, event.type, data, host],
      );
    } catch (error) {
      if (!(isUniqueViolation(error) && attempt < 20)) throw error;
    }
  }
}

interface EventRow {
  turn_id: number;
  seq: number;
  at: string;
  data: string;
}

const toStored = (r: EventRow): StoredEvent => ({
  turnId: r.turn_id,
  seq: r.seq,
  at: r.at,
  event: JSON.parse(r.data) as TurnEvent,
});

export async function readTurnEvents(q: Queryable, turnId: number): Promise<StoredEvent[]> {
  const rows = await q.rows<EventRow>(
    'SELECT turn_id, seq, at, data FROM turn_events WHERE turn_id = $1 ORDER BY seq',
    [turnId],
  );
  return rows.map(toStored);
}

/**
 * A turn's events after `seq`, in order, at most `limit`; or its `last` ones, in order (the primary
 * key serves both ranges: a live view never reads a long turn whole).
 */
export async function readEventWindow(
  q: Queryable,
  turnId: number,
  window: { seq: number; limit: number } | { last: number },
): Promise<StoredEvent[]> {
  const rows =
    'last' in window
      ? await q.rows<EventRow>(
          `SELECT * FROM (SELECT turn_id, seq, at, data FROM turn_events WHERE turn_id = $1 ORDER BY seq DESC LIMIT $2) e
            ORDER BY seq`,
          [turnId, Math.max(0, Math.floor(window.last))],
        )
      : await q.rows<EventRow>(
          'SELECT turn_id, seq, at, data FROM turn_events WHERE turn_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
          [turnId, window.seq, Math.max(0, Math.floor(window.limit))],
        );
  return rows.map(toStored);
}

/**
 * Record a turn's end; every engine string passes through `scrub`. A turn begun under a lease that
 * is no longer current (its host was fenced: the lease expired or moved on) is left as it is and
 * returned as stored, without an error: the host's turn service goes on (its ledger rows are facts)
 * and the turn is settled by the recovery of the lease's new owner.
 */
export async function writeTurnEnd(
  q: Queryable,
  turnId: number,
  end: TurnEnd,
  scrub: (text: string) => string,
  host: string | null = null,
  onRefused?: () => Promise<void>,
): Promise<TurnRecord> {
  const u = end.usage;
  const row = await q.row<TurnRow>(
    `UPDATE turns SET status = $1, end_reason = $2, ended_at = $3, exit_code = $4, exit_signal = $5, model = $6,
       input_tokens = $7, output_tokens = $8, cache_read_tokens = $9, cache_creation_tokens = $10, reasoning_tokens = $11,
       cost_usd = $12, cost_basis = $13, error = $14, warnings = $15
     WHERE id = $16 AND ${turnFenceHolds('turns', '$17')} RETURNING *`,
    [
      end.status,
      end.endReason,
      end.endedAt,
      end.exitCode,
      end.exitSignal,
      end.model,
      u?.inputTokens ?? null,
      u?.outputTokens ?? null,
      u?.cacheReadTokens ?? null,
      u?.cacheCreationTokens ?? null,
      u?.reasoningTokens ?? null,
      end.costUsd,
      end.costUsd === null ? null : 'engine-reported',
      end.error === null ? null : scrub(end.error),
      end.warnings?.length ? scrub(JSON.stringify(end.warnings)) : null,
      turnId,
      host,
    ],
  );
  if (row) return toTurn(row);
  await onRefused?.();
  const stored = await q.row<TurnRow>('SELECT * FROM turns WHERE id = $1', [turnId]);
  if (!stored) throw new LoopError('internal', `no turn ${turnId}`);
  return toTurn(stored);
}

/**
 * The owner processes of the turns recorded running, each once (null: a turn with no owner
 * recorded); with a host, only of its turns (and those with no host recorded).
 */
export async function runningOwners(q: Queryable, host: string | null = null): Promise<(number | null)[]> {
  const rows = await q.rows<{ owner_pid: number | null }>(
    `SELECT DISTINCT owner_pid FROM turns t WHERE t.status = 'running' AND ${hostScope('t', '$1')}`,
    [host],
  );
  return rows.map((r) => r.owner_pid);
}

/**
 * Marks each running turn whose owner process is gone (of a runner not skipped; with a host, of the
 * turns it ran or that record none) lost; says so to `onLost`. Returns how many this call marked (a turn another host marked first is not counted).
 */
export async function recoverLost(
  db: Pg,
  at: string,
  isAlive: (pid: number) => boolean,
  onLost: ((turn: { id: number; pid: number | null; startedAt: string }) => void) | undefined,
  skipRunners: readonly string[],
  host: string | null = null,
): Promise<number> {
  const running = await db.rows<{
    id: number;
    owner_pid: number | null;
    pid: number | null;
    started_at: string;
    runner: string;
  }>(
    `SELECT t.id, t.owner_pid, t.pid, t.started_at, s.runner FROM turns t
       JOIN sessions s ON s.id = t.session_id WHERE t.status = 'running' AND ${hostScope('t', '$1')}
      ORDER BY t.id`,
    [host],
  );
  let lost = 0;
  for (const turn of running) {
    if (skipRunners.includes(turn.runner) || !ownerGone(turn.owner_pid, isAlive)) continue;
    const error = 'the process running this turn ended without recording its end';
    if (!(await db.tx((q) => markTurnLost(q, turn.id, at, error)))) continue;
    onLost?.({ id: turn.id, pid: turn.pid, startedAt: turn.started_at });
    lost += 1;
  }
  return lost;
}

/** The turns of each session named, in their order (one query, however many sessions). */
export async function turnsOfSessions(
  q: Queryable,
  sessionIds: readonly string[],
): Promise<Map<string, TurnRecord[]>> {
  const of = new Map<string, TurnRecord[]>(sessionIds.map((id) => [id, []]));
  if (sessionIds.length === 0) return of;
  const rows = await q.rows<TurnRow>(
    'SELECT * FROM turns WHERE session_id = ANY($1::text[]) ORDER BY session_id, seq',
    [[...sessionIds]],
  );
  for (const row of rows) of.get(row.session_id)?.push(toTurn(row));
  return of;
}

/** Running turns of the given runners whose owner process is gone (with a host, of its turns only). */
export async function orphanTurns(
  q: Queryable,
  isAlive: (pid: number) => boolean,
  runners: readonly string[],
  host: string | null = null,
): Promise<TurnRecord[]> {
  const rows = await q.rows<TurnRow & { session_runner: string }>(
    `SELECT t.*, s.runner AS session_runner FROM turns t JOIN sessions s ON s.id = t.session_id
       WHERE t.status = 'running' AND ${hostScope('t', '$1')} ORDER BY t.id`,
    [host],
  );
  return rows
    .filter((row) => runners.includes(row.session_runner) && ownerGone(row.owner_pid, isAlive))
    .map(({ session_runner: _, ...row }) => toTurn(row));
}

/**
 * Mark a running turn lost and record its unmetered drive, on the caller's transaction. True when
 * this call marked it (a turn already ended, or marked by another host first, is left as it is:
 * the update's condition is checked again once the row lock is had).
 */
export async function markTurnLost(
  q: Queryable,
  turnId: number,
  at: string,
  error: string,
): Promise<boolean> {
  const of = await q.row<{ id: string; work_item: string; engine: string; runner: string }>(
    `UPDATE turns t SET status = 'failed', end_reason = 'lost', ended_at = $1, error = $2
       FROM sessions s WHERE t.id = $3 AND t.status = 'running' AND s.id = t.session_id
     RETURNING s.id, s.work_item, s.engine, s.runner`,
    [at, error, turnId],
  );
  if (!of) return false;
  // Whatever it used before its owner died was not measured: the ledger says so (invariant 2),
  // through its owner's function, in this transaction.
  await insertUnmeteredDrive(q, {
    at,
    sessionId: of.id,
    workItem: of.work_item,
    turnId,
    engine: of.engine,
    runner: of.runner,
    reason: `lost: ${error}`,
  });
  return true;
}

/**
 * Our own pid is never a live owner at recovery: this process has not begun a turn yet, so a match
 * is an earlier life of the same pid (a restarted container).
 */
export function ownerGone(owner: number | null, isAlive: (pid: number) => boolean): boolean {
  return owner === null || owner === process.pid || !isAlive(owner);
}

/**
 * The turn running at `at`: the last one started before it (else the latest). What an OTLP record
 * made then is attributed to.
 */
export async function turnAt(q: Queryable, sessionId: string, at: string): Promise<TurnRecord | undefined> {
  const row = await q.row<TurnRow>(
    `SELECT * FROM turns WHERE session_id = $1 ORDER BY (started_at <= $2) DESC, seq DESC LIMIT 1`,
    [sessionId, at],
  );
  return row && toTurn(row);
}
