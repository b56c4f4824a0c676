import type { DeliveryRecord } from '../core/ports/inbox.js';

/**
 * What recovery decides about turns whose owning process died (pure: sessions/recovery.ts does the
 * I/O around it).
 */

/** How far from a lost turn's start its engine's process may have started. */
export const ENGINE_START_SLACK_MS = 10_000;

/** Why a running turn nobody can adopt any more is marked lost. */
export const LOST_TURN_ERROR = 'the process running this turn ended and no delivery is left to adopt it';

/**
 * Whether the process now holding a lost turn's pid is that turn's engine: one started around the
 * turn's start. A process started at another time (or whose start is unknown) is another program
 * that reuses the pid, and is never stopped.
 */
export function isTurnEngine(turnStartedAt: string, processStarted: Date | null): boolean {
  if (!processStarted) return false;
  return Math.abs(processStarted.getTime() - Date.parse(turnStartedAt)) <= ENGINE_START_SLACK_MS;
}

/**
 * Whether a running turn whose owner died and that no runner adopts is marked lost now: not while
 * its delivery runs (the dispatcher adopts the turn, or runs the delivery again), and, when only one
 * work item is reconciled (`only`), only a turn of that work item's delivery.
 */
export function marksLost(
  delivery: Pick<DeliveryRecord, 'status' | 'workItem'> | undefined,
  only?: string,
): boolean {
  if (delivery?.status === 'running') return false;
  return only === undefined || delivery?.workItem === only;
}

/** Whether a session is checked when recovering (`only`: one work item's). */
export const checksSession = (session: { workItem: string }, only?: string): boolean =>
  only === undefined || session.workItem === only;
