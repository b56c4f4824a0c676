export type DeliveryStatus = 'queued' | 'running' | 'done' | 'failed' | 'rejected' | 'ignored';
export type RouteAction = 'start' | 'deliver' | 'close' | 'ignore' | 'reject';

export interface DeliveryRecord {
  seq: number;
  id: string;
  source: 'github' | 'manual';
  event: string;
  action: string | null;
  receivedAt: string;
  status: DeliveryStatus;
  route: RouteAction | null;
  workItem: string | null;
  reason: string | null;
  attempts: number;
  turnId: number | null;
  error: string | null;
  updatedAt: string;
  /** When retention (`inbox.retainDays`) dropped the body; the row itself is kept. */
  prunedAt: string | null;
}

export interface NewDelivery {
  id: string;
  source: 'github' | 'manual';
  event: string;
  action: string | null;
  body: string;
  /** Routed on arrival (the router is pure): stored with the row, so no second write. */
  route?: { action: RouteAction; workItem: string | null; reason: string | null } | undefined;
}

/** The durable inbox as the core sees it. */
export interface Inbox {
  /** Store a delivery unless its id is known. Returns whether it was new. */
  accept(delivery: NewDelivery): 'accepted' | 'duplicate';
  get(id: string): DeliveryRecord | undefined;
  /** The payload as received; undefined for an unknown delivery or one whose body was pruned. */
  body(id: string): string | undefined;
  /** The payload to route or run: a LoopError that says why when it is unknown or was pruned. */
  readBody(id: string): string;
  list(filter?: { status?: DeliveryStatus; workItem?: string; limit?: number }): DeliveryRecord[];
  /** Queued and running deliveries in arrival order. */
  pending(): DeliveryRecord[];
  /** Run fn in one transaction (one commit for many small writes). */
  batch?<T>(fn: () => T): T;
  setRoute(id: string, route: RouteAction, workItem: string | null, reason: string | null): void;
  /** Note why a queued delivery waits (`held: …`), or clear the note (null). */
  noteHeld(id: string, reason: string | null): void;
  /** queued → running; false when it was not queued (someone else took it). */
  markRunning(id: string): boolean;
  finish(
    id: string,
    result: { status: 'done' | 'failed'; turnId: number | null; error: string | null },
  ): void;
  /** A failed delivery goes back to the queue (at its original place in arrival order). */
  retry(id: string): DeliveryRecord;
  /** Back to queued: for running deliveries whose turn never started (after a crash). */
  requeue(id: string): void;
  /**
   * Retention: drop the bodies of up to `limit` finished deliveries older than `retainDays` (one
   * transaction), keeping their rows. `more` says another call has work left.
   */
  prune(options: PruneOptions): PruneReport;
}

export interface PruneOptions {
  retainDays: number;
  /** The clock (injected by tests); the inbox's own by default. */
  now?: Date;
  /** Bodies dropped per call (one transaction); default 100… */
  limit?: number;
  /** …and it stops once this many bytes of them went (default 64 MiB). */
  maxBytes?: number;
  /** Count what would go, change nothing (every prunable row, no limit). */
  dryRun?: boolean;
}

export interface PruneReport {
  /** Bodies of finished deliveries received and last changed before this instant go; null: kept forever. */
  cutoff: string | null;
  /** Bodies dropped (or, in a dry run, that would be). */
  pruned: number;
  /** Their size in bytes. */
  bytes: number;
  more: boolean;
  dryRun: boolean;
}
