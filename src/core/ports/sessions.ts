import type { CredentialKind } from '../credential.js';
import type { TurnEvent, Usage } from '../events.js';

/**
 * `closed`: by a person or the work item closing; `lost`: the runner's resource vanished under it
 * (tmux session killed, server gone); `ended`: the engine itself ended the session (SessionEnd).
 */
export type SessionStatus = 'active' | 'closed' | 'lost' | 'ended';
export type TurnStatus = 'running' | 'succeeded' | 'failed';
/**
 * Why a turn ended. `result`: the engine's own result event; `exit`: a one-shot process exited (its
 * protocol has no result event); `error`: the engine failed (bad exit, crash, spawn error);
 * `backstop`: our timer ended a wedged turn; `cancel`: someone cancelled it; `interrupted`: a person
 * interrupted it in the engine's TUI (Escape, read from the transcript); `lost`: the process that
 * ran it died without recording an end and it could not be adopted; `untracked`: nothing reports
 * this engine's turn ends (a TUI without hooks).
 */
export type EndReason =
  | 'result'
  | 'exit'
  | 'error'
  | 'backstop'
  | 'cancel'
  | 'interrupted'
  | 'lost'
  | 'untracked';
/** Where a turn's usage comes from; `none`: nothing measures it (recorded as an unmetered drive). */
export type Meter = 'stream-json' | 'codex-json' | 'gemini-json' | 'transcript' | 'otel' | 'wire' | 'none';

/** What a turn's engine ran under: recorded with the turn, shown by `sessions show` and `run`. */
export interface TurnGuard {
  /** `bwrap`: the engine's process tree ran in the bubblewrap sandbox; `none`: it did not. */
  sandbox: 'bwrap' | 'none';
  /** The engine reached its model API (`model`) and git and GitHub (`github`) through the gateway. */
  gateway: { model: boolean; github: boolean };
  /** `bypass`: the engine's own permission prompts were pre-answered; `default`: the engine asked. */
  permissions: 'bypass' | 'default';
  /** Each credential by kind and where it was: held by the gateway, or in the engine's environment. */
  credentials: Array<{ name: string; kind: string; env?: string | undefined; held: 'gateway' | 'engine' }>;
}

/** A TUI waiting for a person (its permission prompt is up): since when, and what it said. */
export interface SessionWaiting {
  since: string;
  message: string;
}

/**
 * A person typing in the session (taken over from the console or the CLI): deliveries to its work
 * item are held until they hand it back.
 */
export interface SessionTakeover {
  /** Who, in words (`alice@host`): shown on every page and in `sessions list`. */
  by: string;
  since: string;
  /** The console login that took over (its public id); null when taken over from the CLI. */
  principal: string | null;
}

export interface SessionRecord {
  id: string;
  /** The work item in its canonical case (`github:octo/widgets#7`). */
  workItem: string;
  /**
   * Names its worktree, state directory and tmux session: stored at creation and never re-derived
   * (sessions from before slugs had a digest keep theirs). One work item's, never another's.
   */
  slug: string;
  engine: string;
  runner: string;
  engineSessionId: string | null;
  /** The engine confirmed the session exists, so the next turn resumes it. */
  engineSessionStarted: boolean;
  cwd: string;
  status: SessionStatus;
  usageBaseline: Usage | null;
  credentialKind: CredentialKind | null;
  credentialEnv: string | null;
  /** Who pays, beyond the kind: an API key's fingerprint (`key:<hex>`) or a cloud (`bedrock`). */
  payerId: string | null;
  /** tmux runner: the tmux session name (`loop-<slug>`), stored at creation. */
  tmuxTarget: string | null;
  /** Deliveries to this session are held (over budget, …) until a person resumes it. */
  hold: SessionHold | null;
  /** What a person raised this session's ceilings by. */
  budgetRaise: BudgetRaise;
  /** The TUI waits for a person (a permission prompt): shown as `waiting for a person`. */
  waiting: SessionWaiting | null;
  /** A person took the session over: its deliveries wait for the hand back. */
  takeover: SessionTakeover | null;
  createdAt: string;
  updatedAt: string;
  closedAt: string | null;
  closeReason: string | null;
}

export type BudgetDimension = 'turns' | 'tokens' | 'usd';

export type SessionHold = BudgetHold | BreachHold | UnaccountedHold | InterruptedHold;

/**
 * Several hosts: the host running the session's turn died, and the turn was interrupted (never run
 * again by itself). The session moved to another host with its conversation; its deliveries wait
 * until a person resumes it (`the-loop sessions resume`), or at once when `store.onHostLoss` is
 * `continue`.
 */
export interface InterruptedHold {
  kind: 'interrupted';
  reason: string;
  /** The interrupted turn. */
  turnId: number;
  /** The host that died. */
  hostId: string;
  since: string;
}

/**
 * The accountability assertion failed: the engine declares a structured meter, yet its first
 * completed turn produced no usage record or no event stream the act extractor could read. Its
 * deliveries are held until a person acknowledges it (`the-loop sessions resume`).
 */
export interface UnaccountedHold {
  kind: 'unaccounted';
  reason: string;
  turnId: number;
  since: string;
}

/**
 * A denied act happened in this session (an engine without a pre-tool hook did what the policy
 * forbids): no further deliveries until a person resumes it (`the-loop sessions resume`).
 */
export interface BreachHold {
  kind: 'breach';
  /** What happened, in words: "pushing to the protected branch main is not allowed … (git push origin main)". */
  reason: string;
  /** The acts (ids in the acts table) that breached the policy. */
  acts: number[];
  turnId: number;
  since: string;
}

export interface BudgetHold {
  kind: 'over-budget';
  /** What was reached, in words: "2 of 2 turns (session, last 24 h)". */
  reason: string;
  dimension: BudgetDimension;
  scope: 'session' | 'work-item';
  used: number;
  limit: number;
  since: string;
}

export type BudgetRaise = Partial<Record<BudgetDimension, number>>;

export interface TurnRecord {
  id: number;
  sessionId: string;
  seq: number;
  promptDigest: string;
  promptBytes: number;
  status: TurnStatus;
  endReason: EndReason | null;
  startedAt: string;
  endedAt: string | null;
  exitCode: number | null;
  exitSignal: string | null;
  pid: number | null;
  deliveryId: string | null;
  meter: Meter;
  model: string | null;
  /** null: nothing measured this turn (unmetered, or the engine died before reporting). Never zero-filled. */
  usage: Usage | null;
  costUsd: number | null;
  costBasis: 'engine-reported' | null;
  error: string | null;
  /** What the engine ran under (null: turns recorded before it was kept). */
  guard: TurnGuard | null;
  /** What the turn must say besides its outcome (tool calls the engine refused, …). */
  warnings: string[];
}

/** Which of a turn's events to read: after a cursor, or the last ones. */
export type EventWindow = { seq: number; limit: number } | { last: number };

export interface StoredEvent {
  turnId: number;
  seq: number;
  at: string;
  event: TurnEvent;
}

export interface NewSession {
  tmuxTarget?: string | null | undefined;
  workItem: string;
  slug: string;
  engine: string;
  runner: string;
  engineSessionId: string | null;
  cwd: string;
  credentialKind: CredentialKind | null;
  credentialEnv: string | null;
  payerId?: string | null | undefined;
}

export interface TurnEnd {
  status: 'succeeded' | 'failed';
  endReason: EndReason;
  endedAt: string;
  exitCode: number | null;
  exitSignal: string | null;
  model: string | null;
  usage: Usage | null;
  costUsd: number | null;
  error: string | null;
  warnings?: string[] | undefined;
}

/**
 * The registry as the core sees it (sessions, turns and their events). Asynchronous, like every port,
 * so another store (PostgreSQL) can implement it; SQLite does (store/sqlite/sessions.ts). A write
 * that must be one transaction is one method (create, beginTurn, markTurnLost…). Events of a turn
 * are kept in the order `appendEvent` was called: callers await each before the next. What an engine
 * said (events, a turn's error and warnings, a waiting message) passes through the store's scrubber.
 */
export interface SessionStore {
  findActive(workItem: string): Promise<SessionRecord | undefined>;
  get(id: string): Promise<SessionRecord | undefined>;
  /** Sessions newest first (by creation), at most `limit` (1000 by default). */
  list(filter?: { workItem?: string; status?: SessionStatus; limit?: number }): Promise<SessionRecord[]>;
  /**
   * The slug a new session of this work item takes (its latest session's, else its own); throws
   * LoopError `slug-collision` when another work item holds it.
   */
  slugFor(workItem: string): Promise<string>;
  /**
   * A new active session; throws `session-busy` when its work item has an active one already,
   * `slug-collision` when another work item holds its slug.
   */
  create(input: NewSession): Promise<SessionRecord>;
  /** Record the engine session id as confirmed by the engine. */
  markEngineSessionStarted(id: string, engineSessionId: string): Promise<void>;
  setUsageBaseline(id: string, usage: Usage): Promise<void>;
  setCredential(
    id: string,
    kind: CredentialKind | null,
    env: string | null,
    payerId?: string | null,
  ): Promise<void>;
  /** Close an active session (one no longer active stays as it was); `session-missing` when unknown. */
  close(id: string, reason: string): Promise<SessionRecord>;
  /** Hold deliveries to a session (null: release it). */
  setHold(id: string, hold: SessionHold | null): Promise<void>;
  /**
   * A person takes the session over (null: hands it back), returning it as written. Taking over
   * needs an active session (`usage` otherwise) that no one else holds (`usage`, naming who);
   * handing back works whatever its status. `session-missing` when unknown.
   */
  setTakeover(id: string, takeover: SessionTakeover | null): Promise<SessionRecord>;
  /**
   * End this take over (the one begun at `held.since` by `held.by`) if it still holds the session:
   * true for the one caller that ended it, false when it was ended already (its drive is recorded once).
   */
  endTakeover(id: string, held: Pick<SessionTakeover, 'by' | 'since'>): Promise<boolean>;
  /** Raise a session's ceilings by these amounts (added to earlier raises). */
  raiseBudget(id: string, raise: BudgetRaise): Promise<SessionRecord>;
  /** An active session found gone (`lost`) or ended by its engine (`ended`), with what was seen. */
  markGone(id: string, status: 'lost' | 'ended', reason: string): Promise<SessionRecord>;
  /** Take over a running turn whose owner died (an adopting daemon): it is now this process's. */
  adoptTurn(turnId: number): Promise<void>;
  /** Forget a turn's stored events (an adopted turn re-reads them from the engine's transcript). */
  clearEvents(turnId: number): Promise<void>;
  /**
   * A running turn, numbered after the session's earlier ones (from 1); throws `session-busy` while
   * another of its turns runs, `session-closed` when it is not active, `session-missing` when unknown.
   */
  beginTurn(
    sessionId: string,
    input: {
      promptDigest: string;
      promptBytes: number;
      meter: Meter;
      deliveryId?: string | undefined;
      guard?: TurnGuard | undefined;
    },
  ): Promise<TurnRecord>;
  /** The session's running turn, else its latest (what the gateway attributes a request to). */
  currentTurn(sessionId: string): Promise<TurnRecord | undefined>;
  /** A TUI waits for a person (null: it went on). */
  setWaiting(id: string, waiting: SessionWaiting | null): Promise<void>;
  /** The turns run for one inbox delivery (normally one; more if a crash interrupted one). */
  turnsForDelivery(deliveryId: string): Promise<TurnRecord[]>;
  setTurnPid(turnId: number, pid: number): Promise<void>;
  appendEvent(turnId: number, event: TurnEvent): Promise<void>;
  finishTurn(turnId: number, end: TurnEnd): Promise<TurnRecord>;
  /** A session's turns in their order (by seq). */
  turns(sessionId: string): Promise<TurnRecord[]>;
  /** The turns of each session named (each in its order): what a list of sessions shows. */
  turnsOfSessions(sessionIds: readonly string[]): Promise<Map<string, TurnRecord[]>>;
  /**
   * A turn's events in the order appended (seq increasing); with `{ seq, limit }`, only those after
   * that seq, at most `limit` of them (what a live view polls for); with `{ last }`, the last ones
   * (where a live view starts), still in order.
   */
  events(turnId: number, window?: EventWindow): Promise<StoredEvent[]>;
  /** Mark running turns whose owning process is gone as failed/lost. Returns how many. */
  recoverLostTurns(
    isAlive: (pid: number) => boolean,
    onLost?: (turn: { id: number; pid: number | null; startedAt: string }) => void,
    options?: { skipRunners?: readonly string[] },
  ): Promise<number>;
  /** The turn running at `at` (ISO): the last one started before it, else the latest. */
  turnAt(sessionId: string, at: string): Promise<TurnRecord | undefined>;
  /** The sessions whose engine session id is known, with the meter of their last turn. */
  engineSessions(): Promise<Array<SessionRecord & { engineSessionId: string; lastMeter: Meter | null }>>;
  /** Running turns whose owning process is gone, of sessions on one of these runners. */
  orphanTurns(isAlive: (pid: number) => boolean, runners: readonly string[]): Promise<TurnRecord[]>;
  /**
   * Mark one running turn lost (its owner died and it cannot be adopted), and record its unmetered
   * drive in the ledger in the same write (recoverLostTurns does the same for each).
   */
  markTurnLost(turnId: number, error: string): Promise<void>;
}
