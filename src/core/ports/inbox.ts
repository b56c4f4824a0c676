import type { ReactionTarget } from './github.js';

export type DeliveryStatus = 'queued' | 'running' | 'done' | 'failed' | 'rejected' | 'ignored';
export type RouteAction = 'start' | 'deliver' | 'close' | 'ignore' | 'reject';

/**
 * How a turn of a routed delivery runs: what the router decided once, at arrival, stored with the
 * delivery and executed as stored (never routed again).
 */
export interface TurnPlan {
  repo: string;
  /** The rendered prompt (outside text, sanitized and fenced). */
  prompt: string;
  /** '' for the configured default. */
  engine: string;
  runner: string;
  repoPath: string;
  workspace: 'checkout' | 'worktree';
  author: string;
  trigger: string;
  /**
   * The digest of the routing config (routing, repos, defaults) the plan was made under. A plan made
   * under another config (a person de-authorized meanwhile, a repository's path fixed) is routed once
   * more, from its body, when it runs. Absent: a plan no config made (`the-loop run`), run as stored.
   */
  routedUnder?: string | undefined;
  /** Where the daemon answers on GitHub (issue 18); absent for a plan no webhook made. */
  answer?: AnswerTarget | undefined;
}

/**
 * Where a delivery is answered on GitHub: the issue or pull request, what the eyes reaction goes
 * on, the App installation it came through and a pull request's head (for its check).
 */
export interface AnswerTarget {
  /** owner/repo as the payload named it. */
  repository: string;
  number: number;
  pull: boolean;
  /** undefined: nothing to react to (GitHub has no reactions on a review). */
  react: ReactionTarget | undefined;
  installationId: number | undefined;
  /** The pull request's head commit when the payload carries it (else looked up). */
  headSha: string | undefined;
}

/** What the router made of a delivery: run a turn, close the work item, or nothing (with why). */
export type RoutedDelivery =
  | ({ action: 'start' | 'deliver'; workItem: string } & TurnPlan)
  | { action: 'close'; workItem: string; repo: string; reason: string }
  | { action: 'ignore'; reason: string; workItem?: string | undefined }
  | {
      action: 'reject';
      reason: string;
      workItem?: string | undefined;
      /** Set only when the person asking had standing: they are told why (never outsiders). */
      answer?: AnswerTarget | undefined;
    };

/** A delivery that runs a turn, with its plan. */
export type RoutedTurn = Extract<RoutedDelivery, { action: 'start' | 'deliver' }>;

export interface DeliveryRecord {
  seq: number;
  id: string;
  source: 'github' | 'manual';
  event: string;
  action: string | null;
  receivedAt: string;
  status: DeliveryStatus;
  /** null: stored unrouted (by a version before routing at arrival); routed once when first seen. */
  route: RouteAction | null;
  workItem: string | null;
  /** Why it was ignored or rejected, or why the work item closed. */
  reason: string | null;
  /** Why this queued delivery waits (its session is held: over budget, a breach…); null when it does not. */
  heldReason: string | null;
  attempts: number;
  turnId: number | null;
  error: string | null;
  updatedAt: string;
  /** When retention (`inbox.retainDays`) dropped the body (and the stored plan); the row itself is kept. */
  prunedAt: string | null;
}

export interface NewDelivery {
  id: string;
  source: 'github' | 'manual';
  event: string;
  action: string | null;
  /**
   * The payload: the bytes as they arrived (a webhook's verified body, a form's `payload=` field as
   * UTF-8), stored as they are and decoded (UTF-8) only when read; or text (a delivery made by hand).
   * Read back by `body`/`readBody` as the same text either way.
   */
  body: string | Uint8Array;
  /**
   * The bytes of `body` decoded as UTF-8, when the caller has decoded them already (ingress, to parse
   * them): the store checks them for secrets without decoding again. Must be that decoding.
   */
  bodyText?: string | undefined;
  /** Routed on arrival (the router is pure): stored with the row, in the same write. */
  routed: RoutedDelivery;
}

export type AcceptOutcome = 'accepted' | 'duplicate';

/** A delivery as it arrives (ingress): `route` is asked only when its id is not stored yet. */
export interface ArrivingDelivery extends Omit<NewDelivery, 'routed'> {
  route: () => RoutedDelivery;
}

/** A queued delivery to take: it runs (or closes) its work item. */
export interface Claim {
  deliveryId: string;
  workItem: string;
  action: 'start' | 'deliver' | 'close';
  source: 'github' | 'manual';
}

/** The writes of one dispatch pass, made in one transaction (`Inbox.applyClaims`). */
export interface ClaimWrites {
  /** Queued → running, each only while it is still queued and first in its work item's line. */
  claims: Claim[];
  /** Held notes to set (a reason) or clear (null), on queued deliveries only. */
  held: Array<{ deliveryId: string; reason: string | null }>;
  /** Queued deliveries settled as ignored, with why (a close waits behind a running turn). */
  ignored: Array<{ deliveryId: string; reason: string }>;
}

export interface DeliveryFilter {
  status?: DeliveryStatus | undefined;
  workItem?: string | undefined;
  limit?: number | undefined;
}

/**
 * The durable inbox as the core sees it. Asynchronous, so that a store other than SQLite can
 * implement it; a write that must be one transaction is one method.
 */
export interface Inbox {
  /**
   * Store deliveries (one transaction) unless their id is known: for each, whether it was new (an id
   * repeated in the batch is a duplicate the second time).
   */
  acceptMany(deliveries: readonly NewDelivery[]): Promise<AcceptOutcome[]>;
  /** One delivery: `acceptMany([delivery])`. */
  accept(delivery: NewDelivery): Promise<AcceptOutcome>;
  /**
   * Store arriving deliveries (one transaction, ingress's group commit): each whose id is not stored
   * yet is routed then — its `route` asked once — and stored with its route; the others are
   * duplicates, not routed again. For each: the route it was stored with, or 'duplicate'.
   */
  acceptArriving(deliveries: readonly ArrivingDelivery[]): Promise<Array<RoutedDelivery | 'duplicate'>>;
  get(id: string): Promise<DeliveryRecord | undefined>;
  /** The payload as received; undefined for an unknown delivery or one whose body was pruned. */
  body(id: string): Promise<string | undefined>;
  /** The payload (of a row stored unrouted): a LoopError that says why when it is unknown or pruned. */
  readBody(id: string): Promise<string>;
  /** The turn plan stored with a start/deliver delivery; undefined when none was stored (or pruned). */
  plan(id: string): Promise<RoutedTurn | undefined>;
  /** Deliveries newest first (the reverse of arrival order), at most `limit` (100 by default). */
  list(filter?: DeliveryFilter): Promise<DeliveryRecord[]>;
  /** Queued and running deliveries in arrival order. */
  pending(): Promise<DeliveryRecord[]>;
  /**
   * Store what the router made of a delivery stored without it (a row from an older version), once:
   * ignore and reject settle it; start and deliver keep its status and store the plan.
   */
  setRoute(id: string, routed: RoutedDelivery): Promise<void>;
  /** One dispatch pass's writes, in one transaction: the claims it won, in the order asked. */
  applyClaims(writes: ClaimWrites): Promise<Claim[]>;
  finish(
    id: string,
    result: { status: 'done' | 'failed'; turnId: number | null; error: string | null },
  ): Promise<void>;
  /**
   * A failed delivery goes back to the queue (at its original place in arrival order). A LoopError
   * `usage` when it is unknown or not failed, `delivery-pruned` when its body was pruned.
   */
  retry(id: string): Promise<DeliveryRecord>;
  /** Back to queued: for running deliveries whose turn never started (after a crash); others stay. */
  requeue(id: string): Promise<void>;
  /**
   * Retention: drop the bodies (and stored plans) of up to `limit` finished deliveries older than
   * `retainDays` (one transaction), keeping their rows. `more` says another call has work left.
   */
  prune(options: PruneOptions): Promise<PruneReport>;
}

export interface PruneOptions {
  retainDays: number;
  /** The clock (injected by tests); the inbox's own by default. */
  now?: Date | undefined;
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
