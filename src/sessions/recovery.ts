import type { Inbox } from '../core/ports/inbox.js';
import type { SessionRecord, SessionStore } from '../core/ports/sessions.js';
import type { Logger } from '../log/logger.js';
import { pidAlive, processStartTime } from '../os/proc.js';
import { checksSession, isTurnEngine, LOST_TURN_ERROR, marksLost } from './recovery-rules.js';

/**
 * Recovery of turns whose owning process died (the decisions in recovery-rules.ts): at start, and by
 * whoever takes the dispatcher lock before it dispatches. The composition root wires it.
 */
export interface LostTurn {
  id: number;
  pid: number | null;
  startedAt: string;
}

/**
 * At start: a running turn whose owning process died is lost. Its engine may still run (it leads its
 * own process group, which outlives its owner); whoever takes the dispatcher lock stops it
 * (stopOrphanEngines). Turns of runners that adopt (`adopting`: tmux) are left to the
 * dispatcher-lock holder: their TUI runs on without us, and it adopts them (reconcile, then
 * Dispatcher.recover). Returns the turns marked lost.
 */
export async function recoverLostTurns(
  store: Pick<SessionStore, 'recoverLostTurns'>,
  adopting: readonly string[],
  logger: Logger,
): Promise<LostTurn[]> {
  const lostTurns: LostTurn[] = [];
  const lost = await store.recoverLostTurns(pidAlive, (turn) => lostTurns.push(turn), {
    skipRunners: adopting,
  });
  if (lost > 0) logger.warn('marked turns of dead processes as lost', { count: lost });
  return lostTurns;
}

/**
 * Stop the engines of lost turns that still run — only a process started around the turn's start
 * (isTurnEngine), so a reused pid never gets another program killed. Call it while holding the
 * dispatcher lock, before a lost delivery runs again. Empties `lostTurns`.
 */
export function stopOrphanEngines(lostTurns: LostTurn[], logger: Logger): void {
  for (const turn of lostTurns) {
    if (turn.pid === null) continue;
    if (!isTurnEngine(turn.startedAt, processStartTime(turn.pid))) continue;
    try {
      process.kill(-turn.pid, 'SIGKILL');
      logger.warn('stopped the engine of a lost turn', { turn: turn.id, pid: turn.pid });
    } catch {
      // Gone already.
    }
  }
  lostTurns.length = 0;
}

export interface ReconcileDeps {
  store: Pick<SessionStore, 'list' | 'orphanTurns' | 'markTurnLost'>;
  inbox: Pick<Inbox, 'get'>;
  /** The session's runner resource checked (TurnService.checkSession): marked lost or ended if gone. */
  checkSession(session: SessionRecord): Promise<unknown>;
  /** The runners that adopt turns (their turns are not lost with their owner). */
  adopting: readonly string[];
  logger: Logger;
}

/**
 * For the dispatcher-lock holder, before it dispatches: active sessions whose runner resource
 * vanished while nobody watched (a tmux session killed, its server gone) are marked lost — or ended,
 * when their engine ended them — with the time noticed; running turns nobody can adopt any more are
 * lost (marksLost). Live sessions keep their turns, which the dispatcher adopts. `only`: one work
 * item's.
 */
export async function reconcile(deps: ReconcileDeps, only?: string): Promise<void> {
  for (const session of await deps.store.list({ status: 'active' })) {
    if (!checksSession(session, only)) continue;
    try {
      await deps.checkSession(session);
    } catch (error) {
      deps.logger.warn('could not check a session on start', { workItem: session.workItem, error });
    }
  }
  for (const turn of await deps.store.orphanTurns(pidAlive, deps.adopting)) {
    const delivery = turn.deliveryId ? await deps.inbox.get(turn.deliveryId) : undefined;
    if (!marksLost(delivery, only)) continue;
    await deps.store.markTurnLost(turn.id, LOST_TURN_ERROR);
  }
}
