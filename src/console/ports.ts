import type { WebSocket } from 'ws';
import type { GroupBy, UsageReport } from '../core/ports/ledger.js';
import type { ActView, EventView, SessionDetail, SessionRow, TakeoverView } from './protocol.js';

/**
 * What the console server asks of the rest of the daemon: functions the composition root wires
 * (main-console.ts) to the stores, the views, take over and resume. The server holds no store and
 * no rule of its own; its tests give it plain functions.
 */
export interface ConsoleDeps {
  sessionRows(): Promise<SessionRow[]>;
  sessionDetail(id: string): Promise<SessionDetail | undefined>;
  /**
   * The stored events (scrubbed, in order) of the session's running turn, else its latest: those
   * after `after` when it names that turn, else its last ones; at most `limit`.
   */
  turnEvents(sessionId: string, after: EventCursor | undefined, limit: number): Promise<EventView[]>;
  usage(query: { since: Date; until: Date; by: GroupBy }): Promise<UsageReport>;
  acts(filter: { breaches: boolean; workItem?: string | undefined }): Promise<ActView[]>;
  /** What `the-loop sessions resume` does; returns what it did (JSON). LoopError when it cannot. */
  resume(sessionId: string, raise: string | undefined): Promise<Record<string, unknown>>;
  /** Record a take over (deliveries held until hand back); LoopError when it cannot. */
  takeOver(sessionId: string, who: { by: string; principal: string | null }): Promise<TakeoverView>;
  /** Release it (its typing recorded as an unmetered drive); LoopError when it cannot. */
  handBack(sessionId: string): Promise<void>;
  /** Wake the dispatcher (a hand back or a resume released held deliveries). */
  notifyDispatcher(): void;
  /** The tmux session a terminal socket attaches to; undefined: no terminal for this session. */
  terminalOf(sessionId: string): Promise<{ target: string; takeover: TakeoverView | null } | undefined>;
}

/** Where a page is in a session's event stream: the last event it was sent. */
export interface EventCursor {
  turnId: number;
  seq: number;
}

/** The terminal hub (console/terminal/hub.ts) as the server uses it. */
export interface TerminalPort {
  attach(
    socket: WebSocket,
    viewer: { sessionId: string; target: string; principal: string; takeover: TakeoverView | null },
  ): void;
  setTakeover(sessionId: string, takeover: TakeoverView | null): void;
  closeSession(sessionId: string, reason: string): void;
  counts(): { viewers: number; sessions: number };
  close(): Promise<void>;
}

/** A session id as the registry makes them (a UUID); anything else never reaches a store. */
export const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
