import type { SessionHold, SessionRecord, SessionStatus } from '../core/ports/sessions.js';
import { takeoverReason } from '../sessions/takeover-rules.js';

/**
 * What a session is, as the console shows it, and why its deliveries wait: pure, table-tested
 * (test/console/status-rules.test.ts).
 */

/**
 * The console's word for a session (protocol.ts's ConsoleStatus, which views.ts checks it against;
 * spelt from the registry's own words here, as the centre imports no adapter's types).
 */
export type ConsoleStatusWord =
  | Exclude<SessionStatus, 'active'>
  | SessionHold['kind']
  | 'held'
  | 'waiting'
  | 'running'
  | 'idle';

/** What the status reads of a session's turns. */
export interface TurnsState {
  /** One of its turns is running. */
  running: boolean;
}

type StatusFields = Pick<SessionRecord, 'status' | 'takeover' | 'waiting' | 'hold'>;

/**
 * One word for a session. An ended one says how it ended. An active one says first what a person
 * must know or do: someone typing in it (`held`: its deliveries wait for the hand back), a TUI
 * waiting for a person, a hold to resume (over budget, a breach, unaccounted); then whether a turn
 * runs; else `idle`.
 */
export function consoleStatus(session: StatusFields, turns: TurnsState): ConsoleStatusWord {
  if (session.status !== 'active') return session.status;
  if (session.takeover) return 'held';
  if (session.waiting) return 'waiting';
  if (session.hold) return session.hold.kind;
  return turns.running ? 'running' : 'idle';
}

/**
 * Why deliveries to the session wait, in words (null: they do not). Only an active session's: a
 * closed one receives nothing, whatever it was holding when it closed.
 */
export function consoleHeldReason(session: StatusFields): string | null {
  if (session.status !== 'active') return null;
  return takeoverReason(session) ?? session.hold?.reason ?? null;
}
