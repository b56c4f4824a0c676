import { describeError, LoopError } from '../core/errors.js';
import type { DeliveryRecord } from '../core/ports/inbox.js';
import type { TurnRecord } from '../core/ports/sessions.js';
import { formatWorkItem, parseWorkItem, workItemSlug } from '../core/work-item.js';
import type { RouteResult } from '../github/route.js';
import { SHUTDOWN } from '../runners/runner.js';
import type { TurnResult } from '../sessions/turn-service.js';
import type { DispatcherDeps, ManualBody } from './dispatcher-deps.js';

export type { DispatcherDeps, ManualBody } from './dispatcher-deps.js';

interface Claim {
  deliveryId: string;
  workItem: string;
  action: string;
}

interface Running {
  deliveryId: string;
  controller: AbortController;
  graceTimer?: NodeJS.Timeout;
}

/**
 * One FIFO per work item, a global concurrency limit, arrival order from the inbox's sequence.
 * A delivery runs only when no earlier delivery of the same work item is still pending, so turns of
 * one session run one at a time, in the order GitHub's events arrived. State lives in the inbox, so
 * a restart resumes where it stopped.
 */
export class Dispatcher {
  private readonly running = new Map<string, Running>();
  private readonly tasks = new Set<Promise<void>>();
  private pumping = false;
  private again = false;
  private stopped = false;
  private poll: NodeJS.Timeout | undefined;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly deps: DispatcherDeps) {}

  /** Settle what a previous process left running, then start dispatching. */
  start(): void {
    this.recover();
    this.poll = setInterval(() => this.notify(), this.deps.pollMs);
    this.notify();
  }

  private recover(): void {
    for (const d of this.deps.inbox.pending()) {
      if (d.status !== 'running') continue;
      if (this.deps.only && d.workItem !== this.deps.only) continue;
      const turns = this.deps.store.turnsForDelivery(d.id);
      // Judge by the newest attempt only: an older finished attempt says nothing about the last one.
      const last = turns.at(-1);
      if (last?.status === 'running' && this.deps.adoptTurn && d.workItem) {
        // Its engine runs on without its owner (a TUI in tmux): follow it instead of running it again.
        this.launchAdoption(d.id, d.workItem, last);
      } else if (last && last.status !== 'running' && last.endReason !== 'lost') {
        // The turn ran to its end; only the bookkeeping was interrupted.
        this.deps.inbox.finish(d.id, {
          status: last.status === 'succeeded' ? 'done' : 'failed',
          turnId: last.id,
          error: last.error,
        });
      } else {
        // Never started, or interrupted by the crash: run it again, in its original place.
        this.deps.inbox.requeue(d.id);
        this.deps.logger.warn('resuming a delivery interrupted by a restart', {
          delivery: d.id,
          interruptedTurns: turns.length,
        });
      }
    }
  }

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
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        // Claim inside one transaction; start engines only after it committed, so no engine ever
        // runs for a claim that a crash could roll back.
        const claims = this.deps.inbox.batch ? this.deps.inbox.batch(() => this.pump()) : this.pump();
        for (const claim of claims) this.launch(claim);
      } while (this.again && !this.stopped);
    } catch (error) {
      // Called from timers and I/O callbacks: an error here must not take the process down. The
      // inbox is unchanged (the transaction rolled back); the next wake-up tries again.
      this.deps.logger.error('dispatch pass failed; will retry', { error });
    } finally {
      this.pumping = false;
    }
    if (this.running.size === 0) this.flushIdle();
  }

  private pump(): Claim[] {
    const claims: Claim[] = [];
    const blocked = new Set(this.running.keys());
    const pending = this.deps.inbox.pending();
    const limit = this.deps.upTo ? pending.find((d) => d.id === this.deps.upTo)?.seq : undefined;
    for (const d of pending) {
      if (d.status === 'running') {
        if (d.workItem) blocked.add(d.workItem);
        continue;
      }
      const route = d.route ? null : this.routeDelivery(d);
      const workItem = route ? ('workItem' in route ? route.workItem : null) : d.workItem;
      const action = route?.action ?? d.route;
      if (action === 'ignore' || action === 'reject' || !workItem) continue;
      if (this.deps.only && workItem !== this.deps.only) continue;
      if (limit !== undefined && d.seq > limit) continue;
      if (blocked.has(workItem)) {
        if (action === 'close') this.closeWhenFree(workItem, d.seq, pending);
        continue;
      }
      blocked.add(workItem);
      // A held session (over budget) gets nothing more until a person resumes it; a close still runs.
      const held = action === 'close' ? undefined : this.deps.heldReason?.(workItem);
      if (held !== undefined) {
        // Every queued delivery of the work item waits behind the hold, and says so (a `run` waiting
        // for a later one must see it too).
        for (const q of pending) {
          if (q.status === 'queued' && q.workItem === workItem && q.route !== 'close') {
            this.deps.inbox.noteHeld(q.id, `held: ${held}`);
          }
        }
        continue;
      }
      if (d.reason?.startsWith('held: ')) this.deps.inbox.noteHeld(d.id, null);
      if (this.running.size + claims.length >= this.deps.concurrency) continue;
      // Claim it: if another dispatcher already did, leave it.
      if (this.deps.inbox.markRunning(d.id))
        claims.push({ deliveryId: d.id, workItem, action: action ?? 'deliver' });
    }
    return claims;
  }

  private routeDelivery(d: DeliveryRecord): RouteResult {
    let route: RouteResult;
    try {
      const payload = JSON.parse(this.deps.inbox.readBody(d.id)) as unknown;
      route = d.source === 'manual' ? manualRoute(payload) : this.deps.route(d.event, payload);
    } catch (error) {
      route = { action: 'reject', reason: `unreadable delivery: ${describeError(error)}` };
    }
    const workItem = 'workItem' in route && route.workItem ? route.workItem : null;
    const reason = 'reason' in route ? route.reason : null;
    this.deps.inbox.setRoute(d.id, route.action, workItem, reason);
    if (route.action === 'reject') this.deps.logger.warn('delivery rejected', { delivery: d.id, reason });
    return route;
  }

  /**
   * A close is waiting behind this work item's turn: deliveries queued before the close will not
   * start a new turn on a closing session (they are settled as ignored, with the reason), and the
   * running turn gets the grace period before it is cancelled.
   */
  private closeWhenFree(workItem: string, closeSeq: number, pending: DeliveryRecord[]): void {
    for (const d of pending) {
      if (
        d.workItem === workItem &&
        d.status === 'queued' &&
        d.seq < closeSeq &&
        (d.route === 'start' || d.route === 'deliver')
      ) {
        this.deps.inbox.setRoute(d.id, 'ignore', workItem, 'the work item closed before this delivery ran');
      }
    }
    this.armCloseGrace(workItem);
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
        inbox.requeue(deliveryId);
        logger.warn('resuming a delivery interrupted by a restart', {
          delivery: deliveryId,
          lostTurn: turn.id,
        });
        return;
      }
      this.settle(deliveryId, result, signal);
    });
  }

  private launch({ deliveryId, workItem, action }: Claim): void {
    this.track(deliveryId, workItem, (signal) => this.execute(deliveryId, workItem, action, signal));
  }

  private track(deliveryId: string, workItem: string, work: (signal: AbortSignal) => Promise<void>): void {
    const controller = new AbortController();
    this.running.set(workItem, { deliveryId, controller });
    const task = work(controller.signal)
      .catch((error: unknown) => {
        this.deps.logger.error('dispatch failed', { delivery: deliveryId, error });
        this.deps.inbox.finish(deliveryId, { status: 'failed', turnId: null, error: describeError(error) });
      })
      .finally(() => {
        const entry = this.running.get(workItem);
        if (entry?.graceTimer) clearTimeout(entry.graceTimer);
        this.running.delete(workItem);
        this.tasks.delete(task);
        // Let the next delivery of this work item (or another) start.
        setImmediate(() => this.notify());
      });
    this.tasks.add(task);
  }

  private async execute(
    deliveryId: string,
    workItem: string,
    action: string,
    signal: AbortSignal,
  ): Promise<void> {
    const { inbox, store, logger } = this.deps;
    if (action === 'close') {
      const session = store.findActive(workItem);
      if (session) store.close(session.id, 'work item closed on GitHub');
      // Always: a worktree may outlive its session (closed by hand, or a crash after the close).
      const note = await this.deps.onClose?.(workItem, session);
      logger.info('work item closed', { workItem, session: session?.id, note });
      inbox.finish(deliveryId, { status: 'done', turnId: null, error: null });
      return;
    }
    const body = inbox.readBody(deliveryId);
    const delivery = inbox.get(deliveryId) as DeliveryRecord;
    const payload = JSON.parse(body) as unknown;
    const route =
      delivery.source === 'manual' ? manualRoute(payload) : this.deps.route(delivery.event, payload);
    if (route.action !== 'start' && route.action !== 'deliver') {
      inbox.finish(deliveryId, { status: 'failed', turnId: null, error: `routing changed: ${route.action}` });
      return;
    }
    try {
      const manual = delivery.source === 'manual' ? (payload as ManualBody) : undefined;
      // A session whose runner resource vanished (its tmux session killed) is marked lost first, so
      // this delivery starts a new session instead of failing on a dead one.
      let active = store.findActive(workItem);
      if (active && this.deps.checkSession)
        active = (await this.deps.checkSession(active)).status === 'active' ? active : undefined;
      const cwd = manual ? manual.cwd : active ? undefined : await this.resolveWorkspace(route);
      const result = await this.deps.runTurn({
        workItem,
        prompt: route.prompt,
        engine: route.engine || undefined,
        runner: route.runner || undefined,
        cwd,
        strict: Boolean(manual),
        deliveryId,
        signal,
        onEvent: this.deps.onEvent,
        onSession: this.deps.onSession,
      });
      this.settle(deliveryId, result, signal);
    } catch (error) {
      const message =
        error instanceof LoopError && error.hint ? `${error.message} (${error.hint})` : describeError(error);
      inbox.finish(deliveryId, { status: 'failed', turnId: null, error: message });
      logger.warn('delivery failed before its turn ran', { delivery: deliveryId, error: message });
    }
  }

  /** Record how a delivery's turn went — or leave it for the next dispatcher when the turn goes on. */
  private settle(deliveryId: string, result: TurnResult, signal: AbortSignal): void {
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
      inbox.requeue(deliveryId);
      logger.info('delivery interrupted by shutdown; queued again', { delivery: deliveryId });
      return;
    }
    inbox.finish(deliveryId, {
      status: result.turn.status === 'succeeded' ? 'done' : 'failed',
      turnId: result.turn.id,
      error: result.turn.error,
    });
  }

  private async resolveWorkspace(
    route: Extract<RouteResult, { action: 'start' | 'deliver' }>,
  ): Promise<string> {
    return this.deps.workspace ? this.deps.workspace(route) : route.repoPath;
  }

  /** Resolves when nothing is running and nothing runnable is queued. */
  idle(): Promise<void> {
    if (this.running.size === 0 && this.tasks.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private flushIdle(): void {
    if (this.tasks.size > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Stop taking work; cancel running turns after `graceMs`; resolve when they have ended. */
  async stop(graceMs = 0): Promise<void> {
    this.stopped = true;
    if (this.poll) clearInterval(this.poll);
    const timer = setTimeout(() => {
      for (const r of this.running.values()) r.controller.abort(SHUTDOWN);
    }, graceMs);
    await Promise.allSettled([...this.tasks]);
    clearTimeout(timer);
  }

  runningCount(): number {
    return this.running.size;
  }
}

function manualRoute(payload: unknown): RouteResult {
  const body = payload as ManualBody;
  const item = parseWorkItem(body.workItem);
  return {
    action: 'deliver',
    workItem: formatWorkItem(item),
    repo: `${item.owner}/${item.repo}`,
    prompt: body.prompt,
    engine: body.engine ?? '',
    runner: body.runner ?? '',
    repoPath: body.cwd ?? '',
    workspace: 'checkout',
    author: 'local',
    trigger: `manual (${workItemSlug(item)})`,
  };
}
