/**
 * This host's lease keeper (issue 17, docs/scale-out.md): it registers the host, heartbeats (renewing
 * every lease it holds in one statement), takes the leases of new work items placement gives it,
 * lets go of those with nothing left to run, reaps the leases of dead hosts, and is the `Fence` the
 * PostgreSQL stores check each write against (the epoch of each lease it holds now).
 *
 * Self-fencing: when no heartbeat has succeeded for half the lease (by this host's monotonic clock,
 * a local deadline only), it drops every epoch it holds (the stores then refuse its writes), claims
 * nothing, and calls `onFenced` (the root stops every process-runner turn). A heartbeat that
 * succeeds again ends it: it then holds what that heartbeat returned, nothing more.
 */
import type { Abandoned, Fence, FenceRefusal, HostStore, Lease } from '../core/ports/hosts.js';
import { type PlacementNeeds, placeWorkItem, shouldAcquire } from '../dispatch/placement-rules.js';

import type { KeeperSettings, KeeperWiring, LeaseCandidate, StrandedSettled } from './keeper-types.js';

export type { KeeperSettings, KeeperWiring, LeaseCandidate, StrandedSettled } from './keeper-types.js';

export class LeaseKeeper implements Fence {
  readonly host: string;
  private readonly epochs = new Map<string, Lease>();
  /** Leases taken while a heartbeat is in flight (its answer may predate them). */
  private fresh: Map<string, Lease> | undefined;
  private wiring: KeeperWiring | undefined;
  private incarnation: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private lastOk = 0;
  /** The reap in progress, if any (one at a time, beside the heartbeats). */
  private reaping: Promise<Abandoned[]> | undefined;
  private beats = 0;
  private fenced = false;
  private failing = false;
  private stopped = false;
  private readonly now: () => number;
  /** The refusals warned of (`refused`), each once. */
  private readonly refusals = new Set<string>();
  /** What each delivery's session needs (a stored plan never changes): asked once per delivery. */
  private readonly needs = new Map<string, PlacementNeeds>();

  constructor(
    private readonly hosts: HostStore,
    private readonly settings: KeeperSettings,
  ) {
    this.host = settings.host;
    this.now = settings.now ?? (() => performance.now());
  }

  /** The epoch of the lease held on `workItem`; undefined when none is held (or self-fenced). */
  epochOf(workItem: string): number | undefined {
    if (this.fenced || this.stopped) return undefined;
    return this.epochs.get(workItem)?.epoch;
  }

  /**
   * A write the stores fenced changed nothing: warned once per turn, delivery or claim (invariant
   * 7), naming the work item, the epoch it was made under and what was not written.
   */
  refused(refusal: FenceRefusal): void {
    if (this.refusals.has(refusal.key)) return;
    if (this.refusals.size >= 10_000) this.refusals.clear();
    this.refusals.add(refusal.key);
    this.wiring?.logger.warn('fenced: not written (this host does not hold the lease at that epoch)', {
      host: this.host,
      workItem: refusal.workItem,
      epoch: refusal.epoch,
      notWritten: refusal.what,
    });
  }

  /** A warning said once per key (the dispatcher's passes repeat: the log must not). */
  private sayOnce(key: string, message: string, fields: Record<string, unknown>): void {
    if (this.refusals.has(key)) return;
    if (this.refusals.size >= 10_000) this.refusals.clear();
    this.refusals.add(key);
    this.wiring?.logger.warn(message, fields);
  }

  /** Whether this host holds `workItem` now (and may write for it). */
  holds(workItem: string): boolean {
    return this.epochOf(workItem) !== undefined;
  }

  /**
   * The dispatcher found a delivery of `workItem` running with no turn of its own on it: settle it
   * under the epoch held now (nothing when none is held). How many deliveries changed.
   */
  async settleStranded(workItem: string): Promise<number> {
    const epoch = this.epochOf(workItem);
    const settle = this.wiring?.settleStranded;
    if (epoch === undefined || !settle) return 0;
    let done: StrandedSettled;
    try {
      done = await settle({ workItem, hostId: this.host, epoch });
    } catch (error) {
      this.sayOnce(
        `stranded-failed ${workItem} ${String(error)}`,
        'settling a delivery left running failed; the next pass tries again',
        { workItem, error },
      );
      return 0;
    }
    if (done.blockedBy) {
      this.sayOnce(
        `stranded-blocked ${workItem} ${done.blockedBy.turnId}`,
        `${workItem}'s line waits behind turn ${done.blockedBy.turnId} (${done.blockedBy.runner} runner, host ${done.blockedBy.hostId ?? 'none'}), recorded running, which this host does not settle: a tmux turn is adopted or ends with its terminal; another host's is settled by its owner or the reaper`,
        { workItem, epoch, ...done.blockedBy },
      );
      return 0;
    }
    const changed = done.failed.length + done.settled.length + done.requeued.length;
    if (changed > 0 || done.turns.length > 0)
      this.wired().logger.warn('deliveries left running with no turn here were settled', {
        workItem,
        epoch,
        ...done,
      });
    return changed;
  }

  /** Whether it stopped claiming: no heartbeat for half the lease. */
  isFenced(): boolean {
    return this.fenced;
  }

  /** Register, then heartbeat every `heartbeatSeconds` until `stop`/`leave`. */
  async start(wiring: KeeperWiring): Promise<void> {
    this.wiring = wiring;
    this.stopped = false;
    await this.register();
    this.timer = setInterval(() => this.tick(), this.settings.heartbeatSeconds * 1000);
    this.timer.unref();
  }

  private async register(): Promise<void> {
    const wiring = this.wired();
    this.incarnation = await this.hosts.register({ id: this.host, ...wiring.info });
    this.epochs.clear();
    this.lastOk = this.now();
    wiring.logger.info('host registered', { host: this.host, incarnation: this.incarnation });
  }

  private wired(): KeeperWiring {
    if (!this.wiring) throw new Error('the lease keeper is not started');
    return this.wiring;
  }

  /** One timer tick: the self-fencing deadline, then a heartbeat unless one is still in flight. */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.checkDeadline();
    this.beating ??= this.heartbeat().finally(() => {
      this.beating = undefined;
    });
    return this.beating;
  }

  private checkDeadline(): void {
    if (this.fenced) return;
    if (this.now() - this.lastOk < (this.settings.leaseSeconds * 1000) / 2) return;
    this.fence('no heartbeat for half the lease');
  }

  private fence(why: string): void {
    const wiring = this.wired();
    this.fenced = true;
    this.epochs.clear();
    wiring.logger.warn('host fenced: claiming nothing, stopping its process-runner turns', {
      host: this.host,
      why,
    });
    try {
      wiring.onFenced();
    } catch (error) {
      wiring.logger.error('stopping turns on fencing failed', { error });
    }
  }

  /** One heartbeat: renew every lease; null (registration gone): fence, register anew. */
  async heartbeat(): Promise<void> {
    const wiring = this.wired();
    let leases: Lease[] | null;
    const fresh = new Map<string, Lease>();
    this.fresh = fresh;
    // The lease is renewed from the database's now() while the statement runs, so no earlier than
    // this: the self-fencing deadline counts from here, not from when the answer came back.
    const sentAt = this.now();
    try {
      leases = await this.hosts.heartbeat(this.host, this.incarnation ?? 0, this.settings.leaseSeconds);
    } catch (error) {
      if (!this.failing) wiring.logger.warn('heartbeat failed; will retry', { host: this.host, error });
      this.failing = true;
      this.checkDeadline();
      return;
    }
    if (this.stopped) return;
    if (this.failing) wiring.logger.info('heartbeat succeeded again', { host: this.host });
    this.failing = false;
    if (leases === null) {
      if (!this.fenced) this.fence('its registration is gone (marked down, or started elsewhere)');
      try {
        await this.register();
      } catch (error) {
        wiring.logger.warn('registering anew failed; will retry', { host: this.host, error });
        return;
      }
      leases = [];
      fresh.clear();
    }
    // An answer that came back after the deadline renewed too late to count on: fenced it stays
    // (the next heartbeat, answered in time, ends it).
    if (this.now() - sentAt >= (this.settings.leaseSeconds * 1000) / 2) {
      this.checkDeadline();
      return;
    }
    this.lastOk = sentAt;
    this.epochs.clear();
    for (const lease of leases) if (!lease.ended) this.epochs.set(lease.workItem, lease);
    for (const [workItem, lease] of fresh) if (!this.epochs.has(workItem)) this.epochs.set(workItem, lease);
    if (this.fenced) {
      this.fenced = false;
      wiring.logger.info('host unfenced: claiming again', { host: this.host, leases: this.epochs.size });
    }
    this.beats++;
    // Reaping (settling each dead host's work items) runs beside the heartbeats, never holding the
    // next one back: a long reap must not make this host miss its own renewals.
    if (this.beats % (this.settings.reapEvery ?? 3) === 0)
      this.reaping ??= this.reap().finally(() => {
        this.reaping = undefined;
      });
  }

  /** Mark silent hosts down, end their expired leases, and settle what each left. */
  async reap(): Promise<Abandoned[]> {
    const { logger, interruptAbandoned, reapAbandoned, onReaped } = this.wired();
    const grace = this.settings.graceSeconds ?? this.settings.leaseSeconds;
    try {
      // A host silent for longer than the lease is down (placement passes over it).
      const down = await this.hosts.markDown(this.settings.leaseSeconds);
      if (down.length > 0) logger.warn('hosts marked down (silent past their lease)', { hosts: down });
      if (reapAbandoned) {
        const settled = await reapAbandoned(grace, (a, error) =>
          logger.error('settling an abandoned work item failed; the next reap tries again', { ...a, error }),
        );
        for (const a of settled)
          logger.warn('work item abandoned by a dead host; its turn interrupted', { ...a });
        if (settled.length > 0) onReaped?.();
        return settled;
      }
      const abandoned = await this.hosts.reapExpired(grace);
      for (const a of abandoned) {
        logger.warn('work item abandoned by a dead host; interrupting its turn', { ...a });
        await interruptAbandoned(a).catch((error: unknown) =>
          logger.error('settling an abandoned work item failed', { ...a, error }),
        );
      }
      return abandoned;
    } catch (error) {
      logger.warn('reaping dead hosts failed; will retry', { error });
      return [];
    }
  }

  /**
   * Of these work items (each with its first pending delivery), the ones this host holds now, taking
   * the lease of those no one holds when placement names this host. Nothing while fenced; a lease
   * being drained (moved away) claims nothing new.
   */
  async owned(candidates: readonly LeaseCandidate[]): Promise<ReadonlySet<string>> {
    const mine = new Set<string>();
    if (this.fenced || this.stopped || this.incarnation === undefined) return mine;
    const open: LeaseCandidate[] = [];
    for (const c of candidates) {
      const lease = this.epochs.get(c.workItem);
      if (!lease) open.push(c);
      else if (!lease.draining) mine.add(c.workItem);
    }
    if (open.length === 0) return mine;
    const { needsOf, logger } = this.wired();
    const hosts = await this.hosts.list();
    const self = hosts.find((h) => h.id === this.host);
    // An ended lease kept for a move's target: placement names that host (only it may take it).
    const reserved = await this.hosts.reservations(open.map((c) => c.workItem));
    for (const c of open) {
      const placed = placeWorkItem({
        needs: await this.needsOf(c.deliveryId, needsOf),
        hosts,
        self: this.host,
        silentAfter: this.settings.leaseSeconds,
        reservedFor: reserved.get(c.workItem),
      });
      if (!shouldAcquire(this.host, placed)) continue;
      const lease = await this.hosts.acquire(
        c.workItem,
        this.host,
        this.incarnation,
        this.settings.leaseSeconds,
      );
      if (!lease || this.fenced) continue;
      this.epochs.set(c.workItem, lease);
      this.fresh?.set(c.workItem, lease);
      mine.add(c.workItem);
      // The next placement of this pass sees this host one lease heavier.
      if (self) self.leases++;
      logger.info('work item leased', { workItem: c.workItem, host: this.host, epoch: lease.epoch });
    }
    return mine;
  }

  private async needsOf(deliveryId: string, ask: KeeperWiring['needsOf']): Promise<PlacementNeeds> {
    const known = this.needs.get(deliveryId);
    if (known) return known;
    const needs = await ask(deliveryId);
    if (this.needs.size >= 10_000) this.needs.clear();
    this.needs.set(deliveryId, needs);
    return needs;
  }

  /**
   * After a dispatch pass: let go of the leases with nothing left here — no delivery pending, no
   * turn running, no active session (a drained one as soon as its turn ended).
   */
  async settle(busy: { pending: ReadonlySet<string>; running: ReadonlySet<string> }): Promise<void> {
    if (this.fenced || this.stopped) return;
    const { hasActiveSession, logger } = this.wired();
    for (const [workItem, lease] of [...this.epochs]) {
      if (busy.running.has(workItem)) continue;
      if (!lease.draining && (busy.pending.has(workItem) || (await hasActiveSession(workItem)))) continue;
      if (this.epochs.get(workItem) !== lease) continue;
      this.epochs.delete(workItem);
      const released = await this.hosts.release(workItem, this.host, lease.epoch);
      logger.info('work item lease released', { workItem, epoch: lease.epoch, released });
    }
  }

  /** Stop the timers (the leases lapse). Idempotent. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Shutdown: stop, then leave (leases released, moved ones handed over, status down). */
  async leave(): Promise<void> {
    this.stop();
    await this.beating?.catch(() => {});
    this.epochs.clear();
    if (this.incarnation !== undefined) await this.hosts.leave(this.host, this.incarnation);
  }
}
