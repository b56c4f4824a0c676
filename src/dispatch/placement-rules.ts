/**
 * Where a new work item goes when several hosts share a store (issue 17): pure rules over the
 * hosts as `HostStore.list()` reports them. Every host computes the same answer from the same list,
 * and only the host named tries to take the lease (`acquire`, which settles any race).
 */
import type { HostRecord } from '../core/ports/hosts.js';

/** What a work item's session needs of its host. */
export interface PlacementNeeds {
  /** Every label the host must offer (`tmux` for a tmux session). */
  labels: readonly string[];
  /** The engine the session runs. */
  engine: string;
}

export interface PlacementInput {
  needs: PlacementNeeds;
  hosts: readonly HostRecord[];
  /** The host deciding: it is alive whatever its heartbeat age says. */
  self: string;
  /**
   * Hosts silent for longer than this (seconds, by the database's clock) are passed over even
   * while still `up` (dying, not yet marked down). Unset: heartbeat age is not looked at.
   */
  silentAfter?: number;
  /**
   * The host an ended lease of the work item is kept for (`sessions move`): named while it is `up`
   * (only it may take the lease then), whatever its load or offer.
   */
  reservedFor?: string | undefined;
}

/** Whether `host` can run a session with these needs at all (load aside). */
export function fits(host: HostRecord, needs: PlacementNeeds): boolean {
  return (
    host.status === 'up' &&
    host.capacity > 0 &&
    host.engines.includes(needs.engine) &&
    needs.labels.every((label) => host.labels.includes(label))
  );
}

/** Less loaded first (leases per unit of capacity, compared exactly), then by id. */
function lighter(a: HostRecord, b: HostRecord): number {
  const load = a.leases * b.capacity - b.leases * a.capacity;
  if (load !== 0) return load;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * The host that should take a new work item: the one its lease is kept for while that host is up;
 * else among the `up` hosts whose labels include every needed label and whose engines include the
 * engine, the least loaded (leases / capacity), ties broken by id; null when none fits.
 */
export function placeWorkItem(input: PlacementInput): string | null {
  const { needs, self, silentAfter, reservedFor } = input;
  if (reservedFor !== undefined && input.hosts.some((h) => h.id === reservedFor && h.status === 'up'))
    return reservedFor;
  const live = (h: HostRecord) =>
    h.id === self || silentAfter === undefined || h.silentSeconds <= silentAfter;
  const candidates = input.hosts.filter((h) => fits(h, needs) && live(h));
  if (candidates.length === 0) return null;
  return [...candidates].sort(lighter)[0]?.id ?? null;
}

/** Whether this host should try to take the lease: the placement named it. */
export function shouldAcquire(self: string, placement: string | null): boolean {
  return placement !== null && placement === self;
}
