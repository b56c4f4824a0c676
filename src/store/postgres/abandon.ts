/**
 * Recovery of a work item whose host died (issue 17): `reapExpired` reports each abandoned lease
 * once, and a surviving host settles what the dead one left, in one transaction composed of the
 * owners' functions (session-abandon.ts for turns and sessions, inbox-abandon.ts for deliveries):
 *
 * - its running turns → failed, `interrupted`, with an error naming the host, and an unmetered
 *   drive (nothing measured what they used); an interrupted turn is never run again by itself;
 * - their deliveries → failed with that error (not requeued);
 * - its other running deliveries: one whose newest turn, of the attempt now running, ended (only
 *   the bookkeeping was cut short) → settled as that turn ended; one that never began a turn (or
 *   whose turn was lost) → back to `queued` in its place (it never ran);
 * - its tmux sessions → `lost` (the terminal was on that host); a process-runner session stays
 *   active (it moves to another host with its conversation, sessions/carry.ts) and, when its turn
 *   was interrupted, is held until a person resumes it (`store.onHostLoss: hold`, the default).
 *
 * The lease row is locked for the transaction (share-locked by `interruptAbandoned`, locked by the
 * reap itself in `reapAndSettle`), so no host takes the work item meanwhile. The
 * deliveries not tied to an interrupted turn, and the tmux sessions without one, are settled only
 * while the lease is still as reaped (ended, at that host and epoch): once another host has taken
 * it, a running delivery may be the new owner's, and is left to it.
 *
 * Idempotent: a second call finds nothing running of that host and nothing left to settle.
 */
import type { Abandoned } from '../../core/ports/hosts.js';
import { fencedBy, reapOneExpiredIn } from './hosts.js';
import {
  type DeliverySettlement,
  type RunningDelivery,
  runningDeliveries,
  settleRunning,
} from './inbox-abandon.js';
import type { Pg, Queryable } from './pg.js';
import {
  holdInterrupted,
  type InterruptedTurn,
  interruptHostTurns,
  loseTmuxSessions,
  type NewestTurn,
  newestTurns,
} from './session-abandon.js';

export interface Interrupted {
  /** Turns interrupted. */
  turns: number[];
  /** Deliveries failed with their interrupted turn. */
  failed: string[];
  /** Deliveries put back in line (they never began a turn). */
  requeued: string[];
  /** Deliveries whose turn had ended: settled done or failed as it ended. */
  settled: string[];
  /** Tmux sessions marked lost. */
  lostSessions: string[];
  /** Process-runner sessions held until a person resumes them (`store.onHostLoss: hold`). */
  heldSessions: string[];
  /**
   * `settleStranded` only: a running turn it must not settle — a tmux turn (its TUI may run on, to
   * be adopted) or another host's — with nothing settled.
   */
  blockedBy?: { turnId: number; hostId: string | null; runner: string };
}

/** Why: the error of each interrupted turn and its delivery, and the close reason of a lost session. */
export const abandonedError = (a: Abandoned): string =>
  `host ${a.hostId} stopped renewing its lease of ${a.workItem} (epoch ${a.epoch}) and was presumed dead; the turn it ran is not run again by itself`;

/** Why: the error of each turn and delivery the holder's sweep settles (`settleStranded`). */
export const strandedError = (held: Abandoned): string =>
  `host ${held.hostId} holds ${held.workItem} (epoch ${held.epoch}) but no turn of it was following this one: its end could not be written (fenced, or the database failed); it is not run again by itself`;

const nothingSettled = (): Interrupted => ({
  turns: [],
  failed: [],
  requeued: [],
  settled: [],
  lostSessions: [],
  heldSessions: [],
});

export type PlannedSettlement = DeliverySettlement & { kind: 'failed' | 'settled' | 'requeued' };

/**
 * What to do with each running delivery (pure): failed with its interrupted turn; settled as its
 * newest turn of this attempt ended; back in line when it never began one (only when `unowned`),
 * or when its turn was lost unless `failLost` (then settled failed as that turn ended); left as it
 * is when its newest turn runs on (not the dead host's).
 */
export function planDeliveries(
  running: readonly RunningDelivery[],
  interrupted: readonly InterruptedTurn[],
  newest: ReadonlyMap<string, NewestTurn>,
  unowned: boolean,
  error: string,
  options: { failLost?: boolean } = {},
): PlannedSettlement[] {
  const cut = new Map(interrupted.flatMap((t) => (t.deliveryId === null ? [] : [[t.deliveryId, t.turnId]])));
  const out: PlannedSettlement[] = [];
  for (const d of running) {
    const turnId = cut.get(d.id);
    if (turnId !== undefined) {
      out.push({ kind: 'failed', id: d.id, status: 'failed', turnId, error });
      continue;
    }
    if (!unowned) continue;
    const last = newest.get(d.id);
    const ofThisAttempt = last !== undefined && last.id > (d.turnId ?? 0);
    if (ofThisAttempt && last.status === 'running') continue;
    if (ofThisAttempt && (last.endReason !== 'lost' || options.failLost)) {
      const status = last.status === 'succeeded' ? 'done' : 'failed';
      out.push({ kind: 'settled', id: d.id, status, turnId: last.id, error: last.error });
    } else out.push({ kind: 'requeued', id: d.id, status: 'queued', turnId: null, error: null });
  }
  return out;
}

/** Whether the lease is still as `reapExpired` left it (ended, that host, that epoch), share-locked. */
async function stillAbandoned(q: Queryable, a: Abandoned): Promise<boolean> {
  // Read only (hosts.ts owns the table): the lock keeps a take-over waiting until this commits.
  const row = await q.row<{ ok: boolean }>(
    `SELECT (ended AND host_id = $2 AND epoch = $3::bigint) AS ok FROM leases WHERE work_item = $1 FOR SHARE`,
    [a.workItem, a.hostId, a.epoch],
  );
  return row?.ok === true;
}

export class PgAbandon {
  constructor(
    private readonly db: Pg,
    private readonly options: {
      now?: () => Date;
      /** `hold` (default): a process-runner session whose turn was interrupted waits for a person. */
      onHostLoss?: 'hold' | 'continue';
    } = {},
  ) {}

  /** Settle what the dead host left on the work item it held at that epoch (see above). */
  async interruptAbandoned(abandoned: Abandoned): Promise<Interrupted> {
    return this.db.tx((q) => this.settle(q, abandoned));
  }

  /**
   * Reap the expired leases and settle what each holder left: one transaction per lease, taken in
   * work-item order (`reapOneExpiredIn`: one expired lease ended, `FOR UPDATE SKIP LOCKED`, then its
   * work item settled, then commit). Its row stays locked until the commit, so no host can take a
   * reaped lease before its work item is settled — a delivery the dead host had claimed is never
   * left running under a new holder. A lease whose settling fails is rolled back whole (reaped again
   * by the next call), reported to `onFailed`, and passed over: the others are settled all the same.
   * A lease another transaction holds (another host reaping it) is passed over too.
   */
  async reapAndSettle(
    graceSeconds: number,
    onFailed?: (abandoned: Abandoned, error: unknown) => void,
  ): Promise<Abandoned[]> {
    const settled: Abandoned[] = [];
    const skip: string[] = [];
    for (;;) {
      let current: Abandoned | undefined;
      try {
        const reaped = await this.db.tx(async (q) => {
          current = await reapOneExpiredIn(q, graceSeconds, skip);
          if (current) await this.settle(q, current);
          return current;
        });
        if (!reaped) return settled;
        settled.push(reaped);
      } catch (error) {
        // Failing before a lease was reaped (the database gone): nothing more can be done now.
        if (!current) throw error;
        skip.push(current.workItem);
        onFailed?.(current, error);
      }
    }
  }

  /**
   * The lease holder's sweep (a delivery stuck `running`): settle the running deliveries of a work
   * item this host holds at `held.epoch` and runs no turn of now — the caller says so (the
   * dispatcher, for a work item it runs nothing of). Their final settling was fenced or failed
   * while the host kept (or took again) the lease, and nothing else would ever settle them: the
   * work item's line would wait forever. In one transaction, only while the lease is still held at
   * that epoch (share-locked): this host's running turns on the work item → failed, `interrupted`
   * (nobody follows them: never run again by itself); each delivery settled as its newest turn of
   * this attempt ended (a lost one: failed), failed with its interrupted turn, or, when it never
   * began one, back in its place in line.
   */
  async settleStranded(held: Abandoned): Promise<Interrupted> {
    return this.db.tx(async (q) => {
      const holds = await q.row<{ ok: boolean }>(
        `SELECT ${fencedBy('$1', '$2', '$3', { lock: true })} AS ok`,
        [held.workItem, held.hostId, held.epoch],
      );
      if (holds?.ok !== true) return nothingSettled();
      const blocking = await q.row<{ id: number; host_id: string | null; runner: string }>(
        `SELECT t.id, t.host_id, s.runner FROM turns t JOIN sessions s ON s.id = t.session_id
          WHERE s.work_item = $1 AND t.status = 'running'
            AND (s.runner = 'tmux' OR t.host_id IS DISTINCT FROM $2::text)
          ORDER BY t.id LIMIT 1`,
        [held.workItem, held.hostId],
      );
      if (blocking)
        return {
          ...nothingSettled(),
          blockedBy: { turnId: blocking.id, hostId: blocking.host_id, runner: blocking.runner },
        };
      const at = (this.options.now?.() ?? new Date()).toISOString();
      const error = strandedError(held);
      const running = await runningDeliveries(q, held.workItem);
      if (running.length === 0) return nothingSettled();
      const interrupted = await interruptHostTurns(q, held, at, error);
      const newest = await newestTurns(
        q,
        running.map((d) => d.id),
      );
      const plan = planDeliveries(running, interrupted, newest, true, error, { failLost: true });
      const changed = new Set(await settleRunning(q, plan, at, (t) => t));
      const done = (kind: PlannedSettlement['kind']) =>
        plan.filter((p) => p.kind === kind && changed.has(p.id)).map((p) => p.id);
      return {
        turns: interrupted.map((t) => t.turnId),
        failed: done('failed'),
        requeued: done('requeued'),
        settled: done('settled'),
        lostSessions: [],
        heldSessions: [],
      };
    });
  }

  private async settle(q: Queryable, abandoned: Abandoned): Promise<Interrupted> {
    const at = (this.options.now?.() ?? new Date()).toISOString();
    const error = abandonedError(abandoned);
    {
      const unowned = await stillAbandoned(q, abandoned);
      const running = await runningDeliveries(q, abandoned.workItem);
      const interrupted = await interruptHostTurns(q, abandoned, at, error);
      const newest = await newestTurns(
        q,
        running.map((d) => d.id),
      );
      const plan = planDeliveries(running, interrupted, newest, unowned, error);
      const changed = new Set(await settleRunning(q, plan, at, (t) => t));
      const done = (kind: PlannedSettlement['kind']) =>
        plan.filter((p) => p.kind === kind && changed.has(p.id)).map((p) => p.id);
      const heldSessions =
        this.options.onHostLoss === 'continue' ? [] : await holdInterrupted(q, interrupted, abandoned, at);
      const lostSessions = await loseTmuxSessions(
        q,
        abandoned.workItem,
        interrupted.filter((t) => t.runner === 'tmux').map((t) => t.sessionId),
        unowned,
        at,
        error,
      );
      return {
        turns: interrupted.map((t) => t.turnId),
        failed: done('failed'),
        requeued: done('requeued'),
        settled: done('settled'),
        lostSessions,
        heldSessions,
      };
    }
  }
}
