/** The lease keeper's settings, what the composition root wires into it, and what it reports (keeper.ts). */
import type { Abandoned, HostInfo } from '../core/ports/hosts.js';
import type { PlacementNeeds } from '../dispatch/placement-rules.js';
import type { Logger } from '../log/logger.js';

export interface KeeperSettings {
  /** This host's id. */
  host: string;
  leaseSeconds: number;
  heartbeatSeconds: number;
  /** How long past its expiry a dead host's lease is reaped (default: leaseSeconds). */
  graceSeconds?: number;
  /** Reap dead hosts' leases every this many heartbeats (default 3). */
  reapEvery?: number;
  /** Monotonic milliseconds (default `performance.now`): the self-fencing deadline only. */
  now?: () => number;
}

/** What the composition root gives the keeper when the daemon starts. */
export interface KeeperWiring {
  /** What this host offers (its id is the settings'). */
  info: Omit<HostInfo, 'id'>;
  logger: Logger;
  /** What the session a delivery starts (or continues) needs of its host. */
  needsOf(deliveryId: string): Promise<PlacementNeeds>;
  /** Whether the work item has an active session (a lease is kept while it has). */
  hasActiveSession(workItem: string): Promise<boolean>;
  /** Self-fenced (or its registration lost): stop every process-runner turn now. */
  onFenced(): void;
  /** Settle what a dead host left on a work item (its running turn interrupted…). */
  interruptAbandoned(abandoned: Abandoned): Promise<void>;
  /**
   * Reap and settle, one transaction per lease (then no host can take a reaped lease before its
   * work item is settled): the leases settled; one that failed is told to `onFailed` and left to
   * the next reap. Without it, the keeper reaps, then settles each.
   */
  reapAbandoned?(
    graceSeconds: number,
    onFailed?: (abandoned: Abandoned, error: unknown) => void,
  ): Promise<Abandoned[]>;
  /** Called after a reap settled work items (the dispatcher looks at the queue again). */
  onReaped?(): void;
  /**
   * Settle the deliveries of a work item this host holds (at that epoch) left `running` with no
   * turn here (their settling was fenced or failed): what was done to each.
   */
  settleStranded?(held: Abandoned): Promise<StrandedSettled>;
}

/** What settling a work item's stranded deliveries did (`KeeperWiring.settleStranded`). */
export interface StrandedSettled {
  /** Turns still recorded running, interrupted. */
  turns: number[];
  /** Deliveries failed with their interrupted turn. */
  failed: string[];
  /** Deliveries settled as their turn had ended. */
  settled: string[];
  /** Deliveries back in line (they never began a turn). */
  requeued: string[];
  /** A running turn not settled here (a tmux turn, another host's): nothing was settled. */
  blockedBy?: { turnId: number; hostId: string | null; runner: string } | undefined;
}

/** The first pending delivery of a work item this host does not run now. */
export interface LeaseCandidate {
  workItem: string;
  deliveryId: string;
}
