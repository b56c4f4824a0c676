import { describeError, LoopError } from '../core/errors.js';
import type { Claim, DeliveryRecord, RoutedTurn } from '../core/ports/inbox.js';
import type { TurnRecord } from '../core/ports/sessions.js';
import { SHUTDOWN } from '../runners/runner.js';
import type { TurnResult } from '../sessions/turn-service.js';
import type { DispatcherDeps } from './dispatcher-deps.js';
import { heldCandidates, planClaims } from './plan-claims.js';
import { planOf, routeUnrouted } from './reroute.js';

export type { DispatcherDeps, ManualBody } from './dispatcher-deps.js';

interface Running {
  deliveryId: string;
  controller: AbortController;
  graceTimer?: NodeJS.Timeout;
}

/**
 * Runs what the inbox holds, as it was routed on arrival: which delivery may run next is decided by
 * `planClaims` (one FIFO per work item, a global concurrency limit, holds, closes), and the claims are
 * taken in one write. State lives in the inbox, so a restart resumes where it stopped.
 */
export class Dispatcher {
  private readonly running = new Map<string, Running>();
  private readonly tasks = new Set<Promise<void>>();
  private pumping = false;
  private again = false;
  private stopped = false;
  /** The dispatch passes in progress (one at a time). */
  private loop: Promise<void> | undefined;
  /** Wake-ups scheduled by turns that ended (idle waits for them too). */
  private nudged = 0;
  private poll: NodeJS.Timeout | undefined;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly deps: DispatcherDeps) {}

  /** Settle what a previous process left running, then start dispatching. Resolves once recovered. */
  start(): Promise<void> {
    const recovered = this.recover();
    this.recovered = recovered;
    this.loop = this.runLoop(recovered);
    return recovered.then(() => {
      if (!this.stopped) this.poll = setInterval(() => this.notify(), this.deps.pollMs);
    });
  }

  private async recover(): Promise<void> {
    const { inbox, store, logger } = this.deps;
    for (const d of await inbox.pending()) {
      if (d.status !== 'running') continue;
      if (this.deps.only && d.workItem !== this.deps.only) continue;
      // Several hosts: another host's delivery is its own (a dead host's is settled by the reaper).
      if (this.deps.leases && !(d.workItem && this.deps.leases.holds(d.workItem))) continue;
      const turns = await store.turnsForDelivery(d.id);
      // Judge by the newest attempt only: an older finished attempt says nothing about the last one.
      const last = turns.at(-1);
      if (last?.status === 'running' && this.deps.adoptTurn && d.workItem) {
        // Its engine runs on without its owner (a TUI in tmux): follow it instead of running it again.
        this.launchAdoption(d.id, d.workItem, last);
      } else if (last && last.status !== 'running' && last.endReason !== 'lost') {
        // The turn ran to its end; only the bookkeeping was interrupted.
        await inbox.finish(d.id, {
          status: last.status === 'succeeded' ? 'done' : 'failed',
          turnId: last.id,
          error: last.error,
        });
      } else {
        // Never started, or interrupted by the crash: run it again, in its original place.
        await inbox.requeue(d.id);
        logger.warn('resuming a delivery interrupted by a restart', {
          delivery: d.id,
          interruptedTurns: turns.length,
        });
      }
    }
  }

  /** Set by `start`: its recovery, which every pass waits for. */
  private recovered: Promise<void> | undefined;
  private soon = false;
  /** Coalesce wake-ups: a burst of accepted deliveries costs one pump, on the next turn of the loop. */
  notifySoon(): void {
    if (this.soon || this.stopped) return;
    this.soon = true;
    setImmediate(() => {
      this.soon = false;
      this.notify();
    });
  }

  notify(): void {
    if (this.stopped) {
      this.flushIdle();
      return;
    }
    // Not started: what a previous process left running is not recovered yet, and a pass now could
    // run a delivery recovery then takes for an interrupted one (and runs again). The pass `start`
    // runs after its recovery sees what was accepted meanwhile.
    if (!this.recovered) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.loop = this.runLoop(this.recovered);
  }

  private async runLoop(before?: Promise<void>): Promise<void> {
    this.pumping = true;
    try {
      // A recovery that failed fails `start`, which says so; nothing is dispatched after it.
      if (
        before &&
        !(await before.then(
          () => true,
          () => false,
        ))
      )
        return;
      do {
        this.again = false;
        await this.pass();
      } while (this.again && !this.stopped);
    } catch (error) {
      // Called from timers and I/O callbacks: an error here must not take the process down. The
      // claims' write is one transaction (all or nothing); the next wake-up tries again.
      this.deps.logger.error('dispatch pass failed; will retry', { error });
    } finally {
      this.pumping = false;
    }
    this.flushIdle();
  }

  /**
   * One pass: read what is pending, plan the claims, take them in one write, and start engines only
   * after it committed (no engine ever runs for a claim that was not written).
   */
  private async pass(): Promise<void> {
    const { inbox } = this.deps;
    const pending = await this.leased(await routeUnrouted(this.deps, await inbox.pending()));
    // What was settled changed the lines: read them again in a pass of their own.
    if (await this.settleStranded(pending)) {
      this.again = true;
      return;
    }
    const base = { pending, running: [...this.running.keys()], only: this.deps.only, upTo: this.deps.upTo };
    // A held session (over budget…) gets nothing more until a person resumes it: asked of the first
    // in line of each work item (asking may put the hold on: a ceiling reached).
    const held = new Map<string, string>();
    for (const workItem of heldCandidates(base)) {
      const reason = await this.deps.heldReason?.(workItem);
      if (reason !== undefined) held.set(workItem, reason);
    }
    const plan = planClaims({ ...base, concurrency: this.deps.concurrency, held });
    if (plan.claims.length > 0 || plan.held.length > 0 || plan.ignored.length > 0) {
      const won = await inbox.applyClaims(plan);
      for (const claim of won) {
        // Stopping meanwhile: the claim goes back to the queue, in its place, for the next dispatcher.
        if (this.stopped) await inbox.requeue(claim.deliveryId);
        else this.launch(claim);
      }
    }
    for (const workItem of plan.graceFor) this.armCloseGrace(workItem);
    await this.deps.leases?.settle({
      pending: new Set(pending.flatMap((d) => (d.workItem ? [d.workItem] : []))),
      running: new Set(this.running.keys()),
    });
    // Deliveries a close made moot were counted against the concurrency limit in this plan: plan
    // again at once rather than leave the slots idle until the next poll.
    if (plan.ignored.length > 0) this.again = true;
  }

  /**
   * Several hosts: only the deliveries of work items this host holds (or runs), the lease of a new
   * work item taken when placement names this host. One host: all of them.
   */
  private async leased(pending: DeliveryRecord[]): Promise<DeliveryRecord[]> {
    const { leases } = this.deps;
    if (!leases) return pending;
    const first = new Map<string, string>();
    for (const d of pending)
      if (d.workItem && !this.running.has(d.workItem) && !first.has(d.workItem)) first.set(d.workItem, d.id);
    const owned = await leases.owned([...first].map(([workItem, deliveryId]) => ({ workItem, deliveryId })));
    return pending.filter((d) => !d.workItem || owned.has(d.workItem) || this.running.has(d.workItem));
  }

  /**
   * Several hosts: a delivery of a held work item left `running` with no turn of this dispatcher
   * on it (its settling write was fenced, or failed, while this host kept or took the lease again)
   * would block its line forever: the gate settles it. Whether any changed; a failure is logged
   * (the next pass tries again) and never stops the pass.
   */
  private async settleStranded(pending: readonly DeliveryRecord[]): Promise<boolean> {
    const { leases, logger } = this.deps;
    if (!leases?.settleStranded || this.stopped) return false;
    const stranded = new Set<string>();
    for (const d of pending)
      if (d.status === 'running' && d.workItem && !this.running.has(d.workItem) && leases.holds(d.workItem))
        stranded.add(d.workItem);
    let changed = 0;
    for (const workItem of stranded) {
      try {
        changed += await leases.settleStranded(workItem);
      } catch (error) {
        logger.warn('settling a delivery left running failed; the next pass tries again', {
          workItem,
          error,
        });
      }
    }
    return changed > 0;
  }

  /**
   * Fenced (this host lost its hold on the store): every running turn is aborted now. A process
   * runner's engine is stopped; a tmux session is left running (its turn detaches: the lease lapses
   * and whoever settles the work item finds it).
   */
  abortRunning(): void {
    for (const r of this.running.values()) r.controller.abort(SHUTDOWN);
  }

  private armCloseGrace(workItem: string): void {
    const running = this.running.get(workItem);
    if (!running || running.graceTimer) return;
    running.graceTimer = setTimeout(() => {
      this.deps.logger.warn('work item closed; cancelling its running turn after the grace period', {
        workItem,
      });
      running.controller.abort();
    }, this.deps.closeGraceMs);
  }

  private launchAdoption(deliveryId: string, workItem: string, turn: TurnRecord): void {
    this.track(deliveryId, workItem, async (signal) => {
      const { inbox, logger } = this.deps;
      const adopt = this.deps.adoptTurn as NonNullable<DispatcherDeps['adoptTurn']>;
      const result = await adopt(turn, {
        signal,
        onEvent: this.deps.onEvent,
        onSession: this.deps.onSession,
      });
      if (!result) {
        await inbox.requeue(deliveryId);
        logger.warn('resuming a delivery interrupted by a restart', {
          delivery: deliveryId,
          lostTurn: turn.id,
        });
        return;
      }
      await this.settle(deliveryId, result, signal);
    });
  }

  private launch(claim: Claim): void {
    this.track(claim.deliveryId, claim.workItem, (signal) => this.execute(claim, signal));
  }

  private track(deliveryId: string, workItem: string, work: (signal: AbortSignal) => Promise<void>): void {
    const controller = new AbortController();
    this.running.set(workItem, { deliveryId, controller });
    const task = work(controller.signal)
      .catch(async (error: unknown) => {
        this.deps.logger.error('dispatch failed', { delivery: deliveryId, error });
        await this.deps.inbox.finish(deliveryId, {
          status: 'failed',
          turnId: null,
          error: describeError(error),
        });
      })
      .catch((error: unknown) => {
        this.deps.logger.error('could not record a failed delivery', { delivery: deliveryId, error });
      })
      .finally(() => {
        const entry = this.running.get(workItem);
        if (entry?.graceTimer) clearTimeout(entry.graceTimer);
        this.running.delete(workItem);
        this.tasks.delete(task);
        // Let the next delivery of this work item (or another) start.
        this.nudged++;
        setImmediate(() => {
          this.nudged--;
          this.notify();
        });
      });
    this.tasks.add(task);
  }

  private async execute(claim: Claim, signal: AbortSignal): Promise<void> {
    const { inbox, store, logger } = this.deps;
    const { deliveryId, workItem } = claim;
    if (claim.action === 'close') {
      const session = await store.findActive(workItem);
      if (session) await store.close(session.id, 'work item closed on GitHub');
      // Always: a worktree may outlive its session (closed by hand, or a crash after the close).
      const note = await this.deps.onClose?.(workItem, session);
      logger.info('work item closed', { workItem, session: session?.id, note });
      await inbox.finish(deliveryId, { status: 'done', turnId: null, error: null });
      return;
    }
    // As routed on arrival; a row from an older version, or one planned under another routing config,
    // is routed once more here.
    const plan = await planOf(this.deps, claim);
    if (!plan) return;
    try {
      const manual = claim.source === 'manual';
      // A session whose runner resource vanished (its tmux session killed) is marked lost first, so
      // this delivery starts a new session instead of failing on a dead one.
      let active = await store.findActive(workItem);
      if (active && this.deps.checkSession)
        active = (await this.deps.checkSession(active)).status === 'active' ? active : undefined;
      const cwd = manual
        ? plan.repoPath || undefined
        : active
          ? undefined
          : await this.resolveWorkspace(plan);
      const result = await this.deps.runTurn({
        workItem,
        prompt: plan.prompt,
        engine: plan.engine || undefined,
        runner: plan.runner || undefined,
        cwd,
        strict: manual,
        deliveryId,
        signal,
        onEvent: this.deps.onEvent,
        onSession: this.deps.onSession,
      });
      await this.settle(deliveryId, result, signal);
    } catch (error) {
      const message =
        error instanceof LoopError && error.hint ? `${error.message} (${error.hint})` : describeError(error);
      await inbox.finish(deliveryId, { status: 'failed', turnId: null, error: message });
      logger.warn('delivery failed before its turn ran', { delivery: deliveryId, error: message });
    }
  }

  /** Record how a delivery's turn went — or leave it for the next dispatcher when the turn goes on. */
  private async settle(deliveryId: string, result: TurnResult, signal: AbortSignal): Promise<void> {
    const { inbox, logger } = this.deps;
    if (result.outcome.detached) {
      // The engine goes on with the turn (a TUI in tmux): the delivery stays in flight, and the next
      // dispatcher adopts the turn instead of running it again.
      logger.info('delivery left in flight for the next daemon to adopt', { delivery: deliveryId });
      return;
    }
    if (this.stopped && signal.aborted && result.outcome.endReason === 'cancel' && !result.outcome.ok) {
      // Cancelled because the dispatcher is stopping (a restart), not because of the work: it runs
      // again, in its place, when dispatching resumes. (A turn that ended on its own before the
      // abort landed is settled below: running it again would do the work twice.)
      await inbox.requeue(deliveryId);
      logger.info('delivery interrupted by shutdown; queued again', { delivery: deliveryId });
      return;
    }
    await inbox.finish(deliveryId, {
      status: result.turn.status === 'succeeded' ? 'done' : 'failed',
      turnId: result.turn.id,
      error: result.turn.error,
    });
  }

  private async resolveWorkspace(plan: RoutedTurn): Promise<string> {
    return this.deps.workspace ? this.deps.workspace(plan) : plan.repoPath;
  }

  /** Resolves when nothing is running and nothing runnable is queued. */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return !this.pumping && this.tasks.size === 0 && this.nudged === 0;
  }

  private flushIdle(): void {
    if (!this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Stop taking work; cancel running turns after `graceMs`; resolve when they have ended. */
  async stop(graceMs = 0): Promise<void> {
    this.stopped = true;
    if (this.poll) clearInterval(this.poll);
    // A pass in progress ends first (a claim it takes from here on goes back to the queue).
    await this.loop;
    const timer = setTimeout(() => {
      for (const r of this.running.values()) r.controller.abort(SHUTDOWN);
    }, graceMs);
    await Promise.allSettled([...this.tasks]);
    clearTimeout(timer);
    this.flushIdle();
  }

  runningCount(): number {
    return this.running.size;
  }
}
