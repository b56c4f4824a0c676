import type { Claim, ClaimWrites, DeliveryRecord } from '../core/ports/inbox.js';

/**
 * Which queued deliveries may run next — a pure rule over plain data. One FIFO per work item: a
 * delivery runs only when no earlier delivery of its work item is pending, so the turns of a session
 * run one at a time, in arrival order; a global concurrency limit; a held work item runs nothing
 * until a person resumes it (a close still runs); a close queued behind a running turn settles the
 * deliveries queued before it and gives that turn its grace period.
 */

export interface ClaimInput {
  /** Queued and running deliveries in arrival order, routed (rows stored unrouted are routed first). */
  pending: readonly DeliveryRecord[];
  /** Work items with a turn in flight in this dispatcher. */
  running: readonly string[];
  concurrency: number;
  /** Only deliveries of this work item (a `the-loop run` with no daemon around)… */
  only?: string | undefined;
  /** …and none that arrived after this delivery. */
  upTo?: string | undefined;
  /** Why a work item's deliveries wait (its hold), for the work items `heldCandidates` named. */
  held: ReadonlyMap<string, string>;
}

export interface ClaimPlan extends ClaimWrites {
  /** Work items whose running turn gets the close grace period (then it is cancelled). */
  graceFor: string[];
}

export const CLOSED_BEFORE_RUN = 'the work item closed before this delivery ran';

type Step =
  | { kind: 'head'; d: DeliveryRecord; workItem: string; action: Claim['action'] }
  | { kind: 'close-behind'; d: DeliveryRecord; workItem: string };

/** The pending deliveries in order, each as what the rule makes of it. */
function walk(input: Omit<ClaimInput, 'held' | 'concurrency'>): Step[] {
  const steps: Step[] = [];
  const blocked = new Set(input.running);
  const limit = input.upTo ? input.pending.find((d) => d.id === input.upTo)?.seq : undefined;
  for (const d of input.pending) {
    if (d.status === 'running') {
      if (d.workItem) blocked.add(d.workItem);
      continue;
    }
    const { route: action, workItem } = d;
    if (action === null || action === 'ignore' || action === 'reject' || !workItem) continue;
    if (input.only && workItem !== input.only) continue;
    if (limit !== undefined && d.seq > limit) continue;
    if (blocked.has(workItem)) {
      if (action === 'close') steps.push({ kind: 'close-behind', d, workItem });
      continue;
    }
    blocked.add(workItem);
    steps.push({ kind: 'head', d, workItem, action });
  }
  return steps;
}

/** The work items whose hold the plan needs to know: the first in line of each, unless it closes. */
export function heldCandidates(input: Omit<ClaimInput, 'held' | 'concurrency'>): string[] {
  return walk(input).flatMap((s) => (s.kind === 'head' && s.action !== 'close' ? [s.workItem] : []));
}

export function planClaims(input: ClaimInput): ClaimPlan {
  const plan: ClaimPlan = { claims: [], held: [], ignored: [], graceFor: [] };
  const ignored = new Set<string>();
  for (const step of walk(input)) {
    const { d, workItem } = step;
    if (step.kind === 'close-behind') {
      // Deliveries queued before the close will not start a new turn on a closing session.
      for (const q of input.pending) {
        if (
          q.workItem === workItem &&
          q.status === 'queued' &&
          q.seq < d.seq &&
          (q.route === 'start' || q.route === 'deliver') &&
          !ignored.has(q.id)
        ) {
          ignored.add(q.id);
          plan.ignored.push({ deliveryId: q.id, reason: CLOSED_BEFORE_RUN });
        }
      }
      if (input.running.includes(workItem) && !plan.graceFor.includes(workItem)) plan.graceFor.push(workItem);
      continue;
    }
    const held = step.action === 'close' ? undefined : input.held.get(workItem);
    if (held !== undefined) {
      // Every queued delivery of the work item waits behind the hold, and says so (a `run` waiting
      // for a later one must see it too).
      for (const q of input.pending) {
        if (
          q.status === 'queued' &&
          q.workItem === workItem &&
          q.route !== 'close' &&
          q.heldReason !== held
        ) {
          plan.held.push({ deliveryId: q.id, reason: held });
        }
      }
      continue;
    }
    if (d.heldReason !== null) plan.held.push({ deliveryId: d.id, reason: null });
    if (input.running.length + plan.claims.length >= input.concurrency) continue;
    plan.claims.push({ deliveryId: d.id, workItem, action: step.action, source: d.source });
  }
  // A first in line that a close behind it settled does not start a turn on the closing session.
  plan.claims = plan.claims.filter((c) => !ignored.has(c.deliveryId));
  return plan;
}
