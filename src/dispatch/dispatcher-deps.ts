import type { Inbox, RoutedDelivery, RoutedTurn } from '../core/ports/inbox.js';
import type { SessionRecord, SessionStore, TurnRecord } from '../core/ports/sessions.js';
import type { Logger } from '../log/logger.js';
import type { TurnRequest, TurnResult } from '../sessions/turn-service.js';

/** What the dispatcher is given: its ports (inbox, sessions, turns) and its settings. */

export type { ManualBody } from './manual-plan.js';

/**
 * The leases of a host among several sharing a PostgreSQL store (the lease keeper, src/hosts/): a
 * host dispatches only the work items it holds. Absent (SQLite, one host): every work item is this
 * host's.
 */
export interface LeaseGate {
  /**
   * Of these work items (each with its first pending delivery), the ones this host holds now; the
   * gate takes the lease of a work item no one holds when placement names this host.
   */
  owned(candidates: ReadonlyArray<{ workItem: string; deliveryId: string }>): Promise<ReadonlySet<string>>;
  /** After a pass: what is pending and running here; the gate lets go of held work items with neither. */
  settle(busy: { pending: ReadonlySet<string>; running: ReadonlySet<string> }): Promise<void>;
  /** Whether this host holds the work item now (recovery settles only those). */
  holds(workItem: string): boolean;
  /**
   * The work item is held here and has a delivery `running` that no turn of this dispatcher runs
   * (its final settling was fenced or failed): settle it (its turn's end, interrupted when still
   * recorded running; back in line when it never began one). Returns how many deliveries changed.
   */
  settleStranded?(workItem: string): Promise<number>;
}

export interface DispatcherDeps {
  inbox: Inbox;
  store: SessionStore;
  runTurn: (request: TurnRequest) => Promise<TurnResult>;
  /**
   * Follow a turn an earlier process left running (a tmux TUI outlives its daemon) to its end.
   * undefined: it could not be adopted (the turn is then recorded lost and its delivery runs again).
   */
  adoptTurn?: (
    turn: TurnRecord,
    request: Pick<TurnRequest, 'signal' | 'onEvent' | 'onSession'>,
  ) => Promise<TurnResult | undefined>;
  /**
   * Why deliveries to this work item's active session must wait (its hold: over budget, …), or
   * undefined. Called before a delivery is claimed; it may put the hold on (a ceiling reached).
   */
  heldReason?: (workItem: string) => Promise<string | undefined>;
  /** Check an active session's runner resource before a turn; returns it updated (lost, ended). */
  checkSession?: (session: SessionRecord) => Promise<SessionRecord>;
  /**
   * The pure router, for rows an older version stored without their route or plan only: they are
   * routed once, when first dispatched, and stored. Every other delivery was routed on arrival and
   * runs as stored. Without it, such a row is rejected (unrouted) or fails (no plan).
   */
  routeLegacy?: ((event: string, payload: unknown) => RoutedDelivery) | undefined;
  /**
   * The digest of the routing config now (`routingDigest`): a stored plan made under another one is
   * routed once more through `routeLegacy` when it runs, so a config change (authorization, a
   * repository's path or engine) applies to what is still queued or retried.
   */
  routingDigest?: string | undefined;
  logger: Logger;
  concurrency: number;
  closeGraceMs: number;
  pollMs: number;
  /** Resolve a session's working directory for a routed event (checkout, or a per-item worktree). */
  workspace?: (route: RoutedTurn) => Promise<string>;
  /** Called when a session closes (remove its worktree...). Returns a note for the log. */
  onClose?: (workItem: string, session: SessionRecord | undefined) => Promise<string | undefined>;
  /** Observe turn events of running deliveries (`the-loop run` following its own). */
  onEvent?: TurnRequest['onEvent'];
  onSession?: TurnRequest['onSession'];
  /** Several hosts: dispatch only the work items this host holds (undefined: all of them). */
  leases?: LeaseGate | undefined;
  /** Only dispatch deliveries of this work item (a `the-loop run` with no daemon around)… */
  only?: string | undefined;
  /** …and none that arrived after this one (later ones are left for whoever dispatches next). */
  upTo?: string | undefined;
}
