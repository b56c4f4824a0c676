/**
 * Hosts sharing one store (issue 17, docs/scale-out.md): each daemon registers itself, heartbeats,
 * and holds leases on the work items it owns. Every instant here is the database's (`now()`), never a
 * host's clock: hosts' clocks may disagree; the database is the one clock they share.
 *
 * A lease names its holder by host id and incarnation (a number the host gets anew at each start),
 * and carries an epoch that grows each time the lease changes hands. A write a host makes for a work
 * item carries the epoch it holds; a write with a stale epoch changes nothing (fencing).
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
  /** Moved to this host once drained (`sessions move --to`). */
  movingTo: string | null;
}

/** A work item whose holder died (its lease expired): what recovery must settle on it. */
export interface Abandoned {
  workItem: string;
  /** The host that held it, and the epoch it held. */
  hostId: string;
  epoch: number;
}

export interface HostStore {
  /** Register (or re-register) this host; returns its new incarnation. Status `up`. */
  register(host: HostInfo): Promise<number>;
  /**
   * One heartbeat: the host's row, and every lease it holds renewed to `leaseSeconds` from now, in
   * one statement. Returns the leases it still holds (a lease taken from it is not renewed), or
   * null when its registration is gone or superseded (another start of the same id): then it holds
   * nothing and must stop.
   */
  heartbeat(hostId: string, incarnation: number, leaseSeconds: number): Promise<Lease[] | null>;
  /** Every host, with its heartbeat age and leases (by the database's clock). */
  list(): Promise<HostRecord[]>;
  /** The current lease of a work item, expired or not; undefined when none. */
  lease(workItem: string): Promise<Lease | undefined>;
  /**
   * Take the lease of a work item for this host when no one holds it (no lease, or an expired one):
   * the epoch grows by one. Returns the lease taken, or undefined when another host holds it.
   */
  acquire(
    workItem: string,
    hostId: string,
    incarnation: number,
    leaseSeconds: number,
  ): Promise<Lease | undefined>;
  /** Let go of a lease this host holds at this epoch (nothing left to run, or drained). */
  release(workItem: string, hostId: string, epoch: number): Promise<boolean>;
  /**
   * Start moving a work item to another host: its lease is marked draining (the holder finishes and
   * lets go, and the target takes it with the next epoch). False when the target is unknown or down.
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
  /** This host leaves (shutdown): its leases released, its status down. */
  leave(hostId: string, incarnation: number): Promise<void>;
}
