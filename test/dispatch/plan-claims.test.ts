/**
 * planClaims: which queued deliveries run next, as a table of plain inputs and the plan each gives
 * (claims, held notes, settled deliveries, grace timers). No inbox, no clock.
 */
import { describe, expect, it } from 'vitest';
import type { DeliveryRecord, RouteAction } from '../../src/core/ports/inbox.js';
import {
  CLOSED_BEFORE_RUN,
  type ClaimInput,
  type ClaimPlan,
  heldCandidates,
  planClaims,
} from '../../src/dispatch/plan-claims.js';

const A = 'github:octo/a#1';
const B = 'github:octo/b#2';
const C = 'github:octo/c#3';

/** A pending delivery: `<work item letter><seq>` names it (a1 is A's, seq 1). */
function d(
  id: string,
  route: RouteAction | null = 'deliver',
  extra: Partial<DeliveryRecord> = {},
): DeliveryRecord {
  const seq = Number(id.slice(1));
  const workItem = { a: A, b: B, c: C }[id[0] as 'a' | 'b' | 'c'];
  return {
    seq,
    id,
    source: 'github',
    event: 'issue_comment',
    action: 'created',
    receivedAt: '2026-03-01T00:00:00.000Z',
    status: 'queued',
    route,
    workItem,
    reason: null,
    heldReason: null,
    attempts: 0,
    turnId: null,
    error: null,
    updatedAt: '2026-03-01T00:00:00.000Z',
    prunedAt: null,
    ...extra,
  };
}

const running = (id: string) => d(id, 'deliver', { status: 'running', attempts: 1 });

const input = (pending: DeliveryRecord[], more: Partial<ClaimInput> = {}): ClaimInput => ({
  pending,
  running: [],
  concurrency: 4,
  held: new Map(),
  ...more,
});

/** The plan, with claims as their ids (their work item and action are checked apart). */
const brief = (plan: ClaimPlan) => ({
  claims: plan.claims.map((c) => c.deliveryId),
  held: plan.held.map((h) => [h.deliveryId, h.reason]),
  ignored: plan.ignored.map((i) => i.deliveryId),
  graceFor: plan.graceFor,
});

const none = { claims: [], held: [], ignored: [], graceFor: [] };

describe('planClaims', () => {
  it.each<[string, ClaimInput, Partial<ReturnType<typeof brief>>]>([
    ['nothing pending: nothing to do', input([]), {}],
    [
      'FIFO per work item: the first of each runs, the next waits',
      input([d('a1'), d('a2'), d('b3')]),
      { claims: ['a1', 'b3'] },
    ],
    ['a running delivery holds its work item', input([running('a1'), d('a2'), d('b3')]), { claims: ['b3'] }],
    [
      'a running delivery holds its work item even when it arrived later (requeued before it)',
      input([d('a1'), running('a2')]),
      { claims: ['a1'] },
    ],
    [
      'a turn in flight in this dispatcher holds its work item and takes a slot',
      input([d('a1'), d('b2'), d('c3')], { running: [A], concurrency: 2 }),
      { claims: ['b2'] },
    ],
    [
      'concurrency: no more claims than free slots, in arrival order',
      input([d('c1'), d('a2'), d('b3')], { concurrency: 2 }),
      { claims: ['c1', 'a2'] },
    ],
    ['concurrency 0 (all slots taken): nothing', input([d('a1')], { concurrency: 0 }), {}],
    [
      'ignored, rejected and unrouted rows are not run, and hold nothing',
      input([d('a1', 'ignore'), d('a2', 'reject'), d('a3', null), d('a4')]),
      { claims: ['a4'] },
    ],
    [
      'held: every queued delivery of the work item says why, none runs; others still run',
      input([d('a1'), d('a2', 'start'), d('b3')], { held: new Map([[A, 'turn ceiling reached']]) }),
      {
        claims: ['b3'],
        held: [
          ['a1', 'turn ceiling reached'],
          ['a2', 'turn ceiling reached'],
        ],
      },
    ],
    [
      'held: a note already saying so is not written again',
      input([d('a1', 'deliver', { heldReason: 'over budget' }), d('a2')], {
        held: new Map([[A, 'over budget']]),
      }),
      { held: [['a2', 'over budget']] },
    ],
    [
      'held: a close still runs (and is never noted held)',
      input([d('a1', 'close'), d('a2')], { held: new Map([[A, 'over budget']]) }),
      { claims: ['a1'] },
    ],
    [
      'released: the first in line loses its note and runs; the next keeps its note until its turn',
      input([d('a1', 'deliver', { heldReason: 'x' }), d('a2', 'deliver', { heldReason: 'x' })]),
      { claims: ['a1'], held: [['a1', null]] },
    ],
    [
      'released but no free slot: the note goes, the claim waits',
      input([d('a1', 'deliver', { heldReason: 'x' })], { concurrency: 0 }),
      { held: [['a1', null]] },
    ],
    [
      'a close behind a running turn: deliveries queued before the close are settled, the turn gets its grace',
      input([running('a1'), d('a2'), d('a3', 'start'), d('a4', 'close'), d('a5')], { running: [A] }),
      { ignored: ['a2', 'a3'], graceFor: [A] },
    ],
    [
      'a close behind a running turn of another dispatcher: settled, no grace timer here',
      input([running('a1'), d('a2'), d('a3', 'close')]),
      { ignored: ['a2'] },
    ],
    [
      'two closes behind one turn: each delivery settled once, one grace timer',
      input([running('a1'), d('a2'), d('a3', 'close'), d('a4'), d('a5', 'close')], { running: [A] }),
      { ignored: ['a2', 'a4'], graceFor: [A] },
    ],
    [
      'a close behind the first in line: that one does not start a turn on the closing session',
      input([d('a1'), d('a2', 'close'), d('b3')]),
      { claims: ['b3'], ignored: ['a1'] },
    ],
    [
      'only: the other work items are left alone',
      input([d('a1'), d('b2'), d('b3')], { only: B }),
      { claims: ['b2'] },
    ],
    [
      'only: a running delivery of another work item is not its business',
      input([running('a1'), d('b2')], { only: B, concurrency: 1 }),
      { claims: ['b2'] },
    ],
    [
      'upTo: nothing that arrived after it',
      input([d('a1'), d('b2'), d('c3')], { upTo: 'b2' }),
      { claims: ['a1', 'b2'] },
    ],
    [
      'only + upTo (a `run` with no daemon): its own delivery, after the earlier ones of its work item',
      input([d('b1'), d('a2'), d('b3'), d('b4')], { only: B, upTo: 'b3' }),
      { claims: ['b1'] },
    ],
  ])('%s', (_name, given, expected) => {
    expect(brief(planClaims(given))).toEqual({ ...none, ...expected });
  });

  it('a claim carries its work item, action and source', () => {
    const plan = planClaims(input([d('a1', 'start'), d('b2', 'close', { source: 'manual' })]));
    expect(plan.claims).toEqual([
      { deliveryId: 'a1', workItem: A, action: 'start', source: 'github' },
      { deliveryId: 'b2', workItem: B, action: 'close', source: 'manual' },
    ]);
    expect(planClaims(input([running('a1'), d('a2'), d('a3', 'close')])).ignored).toEqual([
      { deliveryId: 'a2', reason: CLOSED_BEFORE_RUN },
    ]);
  });
});

describe('heldCandidates: the work items whose hold the plan asks about', () => {
  it('the first in line of each work item that is free to run, unless it closes', () => {
    const pending = [running('a1'), d('a2'), d('b3', 'close'), d('b4'), d('c5'), d('c6')];
    expect(heldCandidates({ pending, running: [] })).toEqual([C]);
    expect(heldCandidates({ pending: [d('a1'), d('b2'), d('c3')], running: [B] })).toEqual([A, C]);
    expect(heldCandidates({ pending: [d('a1'), d('b2'), d('c3')], running: [], only: C })).toEqual([C]);
    expect(heldCandidates({ pending: [d('a1'), d('b2'), d('c3')], running: [], upTo: 'a1' })).toEqual([A]);
  });
});
