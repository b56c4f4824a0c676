import type { App } from './main.js';
import { pidAlive, processStartTime } from './os/proc.js';
import { adoptingRunners } from './runners/runner.js';

/**
 * What the dispatcher-lock holder does before it dispatches (part of the composition root, beside
 * main.ts): stop the engines of turns whose process died, and settle sessions and turns nobody
 * watched.
 */
export interface LostTurn {
  id: number;
  pid: number | null;
  startedAt: string;
}

/**
 * Stop the engines of lost turns that still run — only a process started around the turn's start
 * (checked against its start time), so a reused pid never gets another program killed. Call it while
 * holding the dispatcher lock, before a lost delivery runs again.
 */
export function stopOrphanEngines(app: App): void {
  for (const turn of app.lostTurns) {
    if (turn.pid === null) continue;
    const started = processStartTime(turn.pid);
    const turnStart = Date.parse(turn.startedAt);
    if (!started || Math.abs(started.getTime() - turnStart) > 10_000) continue;
    try {
      process.kill(-turn.pid, 'SIGKILL');
      app.logger.warn('stopped the engine of a lost turn', { turn: turn.id, pid: turn.pid });
    } catch {
      // Gone already.
    }
  }
  app.lostTurns.length = 0;
}

/**
 * For the dispatcher-lock holder, before it dispatches: active sessions whose runner resource
 * vanished while nobody watched (a tmux session killed, its server gone) are marked lost — or ended,
 * when their engine ended them — with the time noticed; running turns nobody can adopt any more are
 * lost. Live sessions keep their turns, which the dispatcher adopts. `only`: one work item's.
 */
export async function reconcile(app: App, only?: string): Promise<void> {
  for (const session of app.store.list({ status: 'active' })) {
    if (only !== undefined && session.workItem !== only) continue;
    try {
      await app.turns.checkSession(session);
    } catch (error) {
      app.logger.warn('could not check a session on start', { workItem: session.workItem, error });
    }
  }
  for (const turn of app.store.orphanTurns(pidAlive, adoptingRunners(app.runners))) {
    const delivery = turn.deliveryId ? await app.inbox.get(turn.deliveryId) : undefined;
    if (delivery?.status === 'running') continue; // the dispatcher adopts it, or runs it again
    if (only !== undefined && delivery?.workItem !== only) continue;
    app.store.markTurnLost(
      turn.id,
      'the process running this turn ended and no delivery is left to adopt it',
    );
  }
}
