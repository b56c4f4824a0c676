/**
 * What begins work on PostgreSQL, fenced (session-fence.ts): a session of a work item, and a turn
 * of a session. With a fence a host that does not hold the work item's lease at its epoch writes
 * nothing and gets `fenced`; the turn records the host and the epoch it was begun under (which its
 * later writes are fenced by). Without one both are written as on one host.
 */
import { LoopError } from '../../core/errors.js';
import type { Fence } from '../../core/ports/hosts.js';
import type { Meter, NewSession, SessionStatus, TurnGuard } from '../../core/ports/sessions.js';
import type { SessionRow, TurnRow } from '../sqlite/session-rows.js';
import type { Queryable } from './pg.js';
import { fencedError, fenceHolds, fenceValues } from './session-fence.js';

export interface TurnInput {
  promptDigest: string;
  promptBytes: number;
  meter: Meter;
  deliveryId?: string | undefined;
  guard?: TurnGuard | undefined;
}

export const turnBusy = (detail: string, cause?: unknown) =>
  new LoopError('session-busy', `${detail} of this session is still running`, {
    hint: 'Turns of one session run one at a time; wait for it to end.',
    ...(cause === undefined ? {} : { cause }),
  });

const INSERT_SESSION = `INSERT INTO sessions (id, work_item, slug, engine, runner, engine_session_id, cwd, status,
    credential_kind, credential_env, payer_id, tmux_target, created_at, updated_at)
  SELECT $1, $2, $3, $4, $5, $6, $7, 'active', $8, $9, $10, $11, $12, $12
   WHERE ${fenceHolds('$2', '$13', '$14')}
  RETURNING *`;

/** Insert a new active session (the caller checked its slug); `fenced` when the fence does not hold. */
export async function insertSession(
  q: Queryable,
  id: string,
  workItem: string,
  input: NewSession,
  at: string,
  fence: Fence | undefined,
): Promise<SessionRow> {
  const [host, epoch] = fenceValues(fence, workItem);
  const row = await q.row<SessionRow>(INSERT_SESSION, [
    id,
    workItem,
    input.slug,
    input.engine,
    input.runner,
    input.engineSessionId,
    input.cwd,
    input.credentialKind,
    input.credentialEnv,
    input.payerId ?? null,
    input.tmuxTarget ?? null,
    at,
    host,
    epoch,
  ]);
  if (!row) throw fencedError(workItem, host, epoch);
  return row;
}

const INSERT_TURN = `INSERT INTO turns (session_id, seq, prompt_digest, prompt_bytes, status, started_at, meter,
    owner_pid, delivery_id, guard, host_id, epoch)
  SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, 'running', $4, $5, $6, $7, $8, $9::text, $10::bigint
    FROM turns WHERE session_id = $1
  HAVING ${fenceHolds('$11', '$9', '$10')}
  RETURNING *`;

/**
 * Begin a turn. The session's row is locked first: two hosts beginning a turn of it at once take
 * turns, and the second sees the first's running turn (and its seq) once it has the lock.
 */
export async function insertTurn(
  q: Queryable,
  sessionId: string,
  input: TurnInput,
  at: string,
  ownerPid: number,
  fence: Fence | undefined,
): Promise<TurnRow> {
  const session = await q.row<{ status: SessionStatus; work_item: string }>(
    'SELECT status, work_item FROM sessions WHERE id = $1 FOR UPDATE',
    [sessionId],
  );
  const running = await q.row<{ id: number }>(
    "SELECT id FROM turns WHERE session_id = $1 AND status = 'running'",
    [sessionId],
  );
  if (running) throw turnBusy(`turn ${running.id}`);
  if (!session) throw new LoopError('session-missing', `no session ${sessionId}`);
  if (session.status !== 'active')
    throw new LoopError('session-closed', `session ${sessionId} is ${session.status}`);
  const [host, epoch] = fenceValues(fence, session.work_item);
  const row = await q.row<TurnRow>(INSERT_TURN, [
    sessionId,
    input.promptDigest,
    input.promptBytes,
    at,
    input.meter,
    ownerPid,
    input.deliveryId ?? null,
    input.guard ? JSON.stringify(input.guard) : null,
    host,
    epoch,
    session.work_item,
  ]);
  if (!row) throw fencedError(session.work_item, host, epoch);
  await q.run('UPDATE sessions SET updated_at = $1 WHERE id = $2', [at, sessionId]);
  return row;
}
