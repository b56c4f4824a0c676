/**
 * The acts audit as the centre sees it: every consequential act a turn performed or tried, from two
 * sources — the turn's tool uses, classified after the turn (`command`: best effort), and the
 * gateway, which saw the ref update or the API call itself (`wire`: its outcome is certain). Each
 * source numbers its acts within a turn. The vocabulary of kinds and details is the acts module's
 * (`Kind`, `Detail`); the SQLite store implements it (store/sqlite/acts.ts).
 */
export type ActOutcome = 'succeeded' | 'failed' | 'blocked' | 'unknown';
export type ActSource = 'command' | 'wire';

/** An act ready to store: what the audit settled, or what the gateway saw. */
export interface NewAct<Kind extends string = string, Detail = unknown> {
  seq: number;
  toolUseId: string | null;
  tool: string;
  kind: Kind;
  command: string;
  detail: Detail;
  evasion?: string | undefined;
  outcome: ActOutcome;
  verdict: 'allow' | 'deny';
  rule: string | null;
  breach: boolean;
}

/** The turn the acts belong to, and when they were recorded. */
export interface ActTurn {
  id: number;
  /** The turn's number in its session. */
  seq: number;
  sessionId: string;
  workItem: string;
  engine: string;
  runner: string;
  at: string;
}

export interface ActRecord<Kind extends string = string, Detail = unknown> {
  id: number;
  turnId: number;
  turnSeq: number | null;
  /** `command`: found in the turn's tool uses (best effort); `wire`: seen by the gateway (certain). */
  source: ActSource;
  sessionId: string;
  workItem: string;
  engine: string;
  runner: string;
  seq: number;
  toolUseId: string | null;
  tool: string;
  kind: Kind;
  command: string;
  detail: Detail;
  evasion: string | null;
  outcome: ActOutcome;
  verdict: 'allow' | 'deny';
  rule: string | null;
  breach: boolean;
  at: string;
}

export interface ActFilter<Kind extends string = string> {
  workItem?: string | undefined;
  sessionId?: string | undefined;
  kind?: Kind | undefined;
  since?: Date | undefined;
  turnId?: number | undefined;
  breachesOnly?: boolean | undefined;
  limit?: number | undefined;
}

export interface ActStore<Kind extends string = string, Detail = unknown> {
  /**
   * Store a turn's acts of one source, in one transaction (idempotent per turn, source and
   * position). Their text (command, detail) is scrubbed of secrets before it is stored.
   */
  save(turn: ActTurn, acts: readonly NewAct<Kind, Detail>[], source: ActSource): Promise<void>;
  /** Store one act the gateway saw, numbered after the turn's earlier wire acts (one transaction). */
  saveWire(turn: ActTurn, act: Omit<NewAct<Kind, Detail>, 'seq'>): Promise<void>;
  /** Acts, newest first (by `at`; of one instant, the last stored first); at most `limit` (default 1000). */
  list(filter?: ActFilter<Kind>): Promise<ActRecord<Kind, Detail>[]>;
}
