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
  body(id: string): string | undefined;
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
}
