/**
 * Hosts sharing one store (issue 17, docs/scale-out.md): each daemon registers itself, heartbeats,
 * and holds leases on the work items it owns. Every instant here is the database's (`now()`), never a
 * host's clock: hosts' clocks may disagree; the database is the one clock they share.
 *
 * A lease names its holder by host id and incarnation (a number the host gets anew at each start),
 * and carries an epoch that grows each time the lease changes hands. A write a host makes for a work
 * item carries the epoch it holds; a write with a stale epoch changes nothing (fencing).
 *
 * A lease is held, or ended. It ends when its holder lets go (`release`, `leave`) or when it expired
 * and was reaped (`reapExpired`: its holder died, and recovery settles what it left). Only an ended
 * lease can be taken by another host, so a dead holder's work is always reported for recovery
 * before anyone else takes it. An expired lease that is not yet reaped is no one's: no one else may
 * take it, its holder's writes are fenced (`holds` is false), and its holder's heartbeat does not
 * renew it (the holder fenced itself before then and cut its turn off: renewed, that turn's
 * delivery would stay running under a lease nobody reaps). The reaper settles it after the grace.
 */

export type HostStatus = 'up' | 'draining' | 'down';

export interface HostInfo {
  id: string;
  /** What the host offers (`tmux`, …): a session goes only to a host with every label it needs. */
  labels: string[];
  /** Engines installed on the host. */
  engines: string[];
  /** Turns the host runs at once. */
  capacity: number;
  /** How a person reaches it (an ssh destination), shown by `sessions attach` on another host. */
  address: string | null;
}

export interface HostRecord extends HostInfo {
  incarnation: number;
  status: HostStatus;
  startedAt: string;
  heartbeatAt: string;
  /** Seconds since its last heartbeat, by the database's clock. */
  silentSeconds: number;
  /** Work items whose lease it holds (unexpired). */
  leases: number;
}

export interface Lease {
  workItem: string;
  hostId: string;
  incarnation: number;
  epoch: number;
  /** ISO, the database's clock. */
  expiresAt: string;
  /** Being moved: the holder finishes its running turn, claims nothing new, then lets go. */
  draining: boolean;
  /** Moved to this host once drained (`sessions move --to`); only it may take the lease once ended. */
  movingTo: string | null;
  /** Let go (released, or reaped after it expired): another host may take it. */
  ended: boolean;
}

/** A work item whose holder died (its lease expired): what recovery must settle on it. */
export interface Abandoned {
  workItem: string;
  /** The host that held it, and the epoch it held. */
  hostId: string;
  epoch: number;
}

export interface HostStore {
  /**
   * Register (or re-register) this host; returns its new incarnation. Status `up`. The leases of an
   * earlier incarnation of the same id are expired at once (that start is over): reaped after the
   * grace, they are recovered like any dead host's.
   */
  register(host: HostInfo): Promise<number>;
  /**
   * One heartbeat: the host's row, and every lease it holds renewed to `leaseSeconds` from now, in
   * one statement. Returns the leases it still holds (a lease taken from it is not renewed), or
   * null when its registration is gone, superseded (another start of the same id) or marked down
   * (`markDown`, `leave`): then it holds nothing and must stop (and register anew to go on). An
   * expired lease is not renewed: the reaper settles it.
   */
  heartbeat(hostId: string, incarnation: number, leaseSeconds: number): Promise<Lease[] | null>;
  /** Every host, with its heartbeat age and leases (by the database's clock). */
  list(): Promise<HostRecord[]>;
  /** The current lease of a work item, expired or not; undefined when none. */
  lease(workItem: string): Promise<Lease | undefined>;
  /**
   * Take the lease of a work item for this host when no one holds it (no lease yet, or an ended one):
   * the epoch grows by one, in one statement (of two hosts at once, exactly one wins). An ended
   * lease being moved goes only to its target (unless the target is no longer up). Returns the lease
   * taken, or undefined when another host holds it, its holder's lease expired but is not reaped
   * yet, or this host's registration is not current and up.
   */
  acquire(
    workItem: string,
    hostId: string,
    incarnation: number,
    leaseSeconds: number,
  ): Promise<Lease | undefined>;
  /**
   * Let go of a lease this host holds at this epoch (nothing left to run, or drained). A lease being
   * moved goes straight to its target when that host is up: its holder becomes the target, with the
   * epoch + 1 and as long a lease as was last renewed (the target sees it in its next heartbeat);
   * otherwise it ends. False when this host does not hold it at this epoch.
   */
  release(workItem: string, hostId: string, epoch: number): Promise<boolean>;
  /**
   * Start moving a work item to another host: its lease is marked draining (the holder finishes and
   * lets go, and the target takes it with the next epoch). An ended lease is reserved for the
   * target. False when the target is unknown or not up, when no host ever held the work item, or
   * when the target holds it already.
   */
  move(workItem: string, toHost: string): Promise<boolean>;
  /** Whether `epoch` is still the current, unexpired lease of `hostId` on `workItem`. */
  holds(workItem: string, hostId: string, epoch: number): Promise<boolean>;
  /**
   * Leases whose holder stopped renewing them more than `graceSeconds` past expiry: they are ended
   * (the epoch kept, so the next holder's is larger) and returned, once each, for recovery.
   */
  reapExpired(graceSeconds: number): Promise<Abandoned[]>;
  /** Mark hosts silent for longer than `silentSeconds` as down. Returns their ids. */
  markDown(silentSeconds: number): Promise<string[]>;
  /** This host leaves (shutdown): its leases released (moved ones handed over), its status down. */
  leave(hostId: string, incarnation: number): Promise<void>;
}

/**
 * What a PostgreSQL store fences a host's writes with: this host's id, and the epoch of each lease it
 * holds now (undefined: it holds none on that work item). Kept by the host's lease keeper
 * (heartbeats, acquisitions, releases); read by the stores at each write. A write for a work item
 * whose epoch is stale or absent changes nothing.
 */
export interface Fence {
  readonly host: string;
  epochOf(workItem: string): number | undefined;
  /**
   * A fenced write changed nothing (invariant 7: said, never silent): the stores tell the fence,
   * which warns once per `key` (a turn's or a delivery's write, a work item's claims at an epoch).
   */
  refused?(refusal: FenceRefusal): void;
}

/** What a fenced write did not write, and why (`Fence.refused`). */
export interface FenceRefusal {
  workItem: string;
  /** The epoch the write was made under (null: this host held no lease of the work item). */
  epoch: number | null;
  /** What was not written: "the end of turn 12", "the settling of delivery d-1 (done)"… */
  what: string;
  /** Warned once per key. */
  key: string;
}
