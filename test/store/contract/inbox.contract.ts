/**
 * The Inbox contract: a delivery accepted once (a redelivery is a duplicate and changes nothing),
 * kept in arrival order, claimed only by the first of its work item's line and by one claimer of
 * two at once, retried at its original place, requeued after a crash, pruned by retention, across a
 * restart, and what came from outside scrubbed before it is kept.
 */
import { describe, expect, it } from 'vitest';
import type { DeliveryRecord, Inbox, RoutedDelivery } from '../../../src/core/ports/inbox.js';
import { type StoreFactory, useStore } from './factory.js';
import {
  CANARY,
  claimOf,
  delivery,
  finishedTurn,
  onlyClaims,
  openSession,
  outcome,
  routed,
  scrubCanary,
  workItem,
} from './fixtures.js';

const DAY = 24 * 60 * 60 * 1000;
const ids = (records: DeliveryRecord[]) => records.map((d) => d.id);
const queue = async (inbox: Inbox, id: string, item = workItem()) => {
  expect(await inbox.accept(delivery(id, routed('deliver', item)))).toBe('accepted');
  return claimOf(id, item);
};
/** A delivery accepted, claimed and finished. */
const settled = async (inbox: Inbox, id: string, status: 'done' | 'failed', error: string | null = null) => {
  const claim = await queue(inbox, id);
  expect(await inbox.applyClaims(onlyClaims(claim))).toEqual([claim]);
  await inbox.finish(id, { status, turnId: null, error });
};

export function inboxContract(factory: StoreFactory): void {
  describe(`Inbox contract (${factory.name})`, () => {
    describe('arrival, duplicates and order', () => arrivalAndOrder(factory));
    describe('claims and outcomes', () => claimsAndOutcomes(factory));
    describe('two handles, restart, retention, scrubbing', () => twoHandlesRestartAndRetention(factory));
  });
}

function arrivalAndOrder(factory: StoreFactory): void {
  const { store, restart } = useStore(factory);

  it('accepts a delivery once: the same id again is a duplicate, and the first stays as it was', async () => {
    const item = workItem();
    const body = '{"zen":  "first",\n "n": 1}';
    const first = delivery('d-1', routed('deliver', item, { prompt: 'first prompt' }), body);
    expect(await store().inbox.accept(first)).toBe('accepted');
    const again = delivery('d-1', routed('ignore', workItem(), { reason: 'other' }), '{"zen":"second"}');
    expect(await store().inbox.accept(again)).toBe('duplicate');
    expect(await store().inbox.get('d-1')).toMatchObject({
      id: 'd-1',
      source: 'github',
      event: 'issue_comment',
      action: 'created',
      status: 'queued',
      route: 'deliver',
      workItem: item,
      reason: null,
      heldReason: null,
      attempts: 0,
      turnId: null,
      error: null,
      prunedAt: null,
    });
    expect(await store().inbox.body('d-1')).toBe(body);
    expect(await store().inbox.readBody('d-1')).toBe(body);
    expect(await store().inbox.plan('d-1')).toEqual(routed('deliver', item, { prompt: 'first prompt' }));
    expect(ids(await store().inbox.list())).toEqual(['d-1']);
  });

  it('a body given as bytes reads back as their UTF-8 text, whatever they hold, across a restart', async () => {
    const item = workItem();
    const bytes = Buffer.concat([
      Buffer.from('{"t":"café \\u0000 '),
      Buffer.from([0xff, 0xe2, 0x82]),
      Buffer.from('"}'),
    ]);
    // A view into a larger buffer: only its bytes are the body.
    const framed = Buffer.concat([Buffer.from('head'), bytes, Buffer.from('tail')]);
    const view = new Uint8Array(framed.buffer, framed.byteOffset + 4, bytes.length);
    await store().inbox.accept({ ...delivery('d-1', routed('deliver', item)), body: view });
    await store().inbox.acceptMany([
      { ...delivery('d-2', routed('deliver', item)), body: bytes, bodyText: bytes.toString('utf8') },
    ]);
    const after = (await restart()).inbox;
    for (const id of ['d-1', 'd-2']) {
      expect(await after.body(id)).toBe(bytes.toString('utf8'));
      expect(await after.readBody(id)).toBe(bytes.toString('utf8'));
    }
  });

  it('accepts many at once: an outcome per delivery, in order; a known or repeated id is a duplicate', async () => {
    const item = workItem();
    await store().inbox.accept(delivery('d-1', routed('deliver', item)));
    const batch = ['d-2', 'd-1', 'd-3', 'd-2'].map((id) => delivery(id, routed('deliver', item)));
    expect(await store().inbox.acceptMany(batch)).toEqual(['accepted', 'duplicate', 'accepted', 'duplicate']);
    expect(await store().inbox.acceptMany([])).toEqual([]);
    expect(ids(await store().inbox.pending())).toEqual(['d-1', 'd-2', 'd-3']);
  });

  it('keeps arrival order: pending oldest first with seq increasing, lists newest first', async () => {
    const [one, two] = [workItem(), workItem()];
    await store().inbox.accept(delivery('a', routed('deliver', one)));
    await store().inbox.accept(delivery('b', routed('start', two)));
    await store().inbox.accept(delivery('c', routed('ignore', one)));
    await store().inbox.acceptMany([
      delivery('d', routed('deliver', one)),
      delivery('e', routed('close', two)),
    ]);
    const pending = await store().inbox.pending();
    expect(ids(pending)).toEqual(['a', 'b', 'd', 'e']);
    const seqs = pending.map((d) => d.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).toBe(4);
    expect(ids(await store().inbox.list())).toEqual(['e', 'd', 'c', 'b', 'a']);
    expect(ids(await store().inbox.list({ limit: 2 }))).toEqual(['e', 'd']);
    expect(ids(await store().inbox.list({ workItem: one }))).toEqual(['d', 'c', 'a']);
    expect(ids(await store().inbox.list({ status: 'ignored' }))).toEqual(['c']);
  });

  it('settles what the router ignored or rejected, with why; a close waits in the queue without a plan', async () => {
    const item = workItem();
    await store().inbox.acceptMany([
      delivery('ignored', routed('ignore', item, { reason: 'a bot wrote it' })),
      delivery('rejected', routed('reject', item, { reason: 'not allowed' })),
      delivery('close', routed('close', item, { reason: 'issue closed' })),
    ]);
    expect(await store().inbox.get('ignored')).toMatchObject({ status: 'ignored', reason: 'a bot wrote it' });
    expect(await store().inbox.get('rejected')).toMatchObject({ status: 'rejected', reason: 'not allowed' });
    expect(await store().inbox.get('close')).toMatchObject({
      status: 'queued',
      route: 'close',
      workItem: item,
      reason: 'issue closed',
    });
    for (const id of ['ignored', 'rejected', 'close']) expect(await store().inbox.plan(id)).toBeUndefined();
    expect(ids(await store().inbox.pending())).toEqual(['close']);
  });

  it('answers unknown ids with nothing, and says why where it must give a body or retry', async () => {
    const inbox = store().inbox;
    expect(await inbox.get('nope')).toBeUndefined();
    expect(await inbox.body('nope')).toBeUndefined();
    expect(await inbox.plan('nope')).toBeUndefined();
    expect(await outcome(() => inbox.readBody('nope'))).toBe('usage');
    expect(await outcome(() => inbox.retry('nope'))).toBe('usage');
    await inbox.requeue('nope');
    expect(await inbox.applyClaims(onlyClaims(claimOf('nope', workItem())))).toEqual([]);
    expect(await inbox.list()).toEqual([]);
  });

  it('stores arriving deliveries in one go, routing only those whose id is not stored yet', async () => {
    const item = workItem();
    expect(await store().inbox.accept(delivery('a-1', routed('ignore', item, { reason: 'first' })))).toBe(
      'accepted',
    );
    const asked: string[] = [];
    const arriving = (id: string, route: RoutedDelivery) => {
      const { routed: _routed, ...rest } = delivery(id, route, `{"id":"${id}"}`);
      return {
        ...rest,
        route: () => {
          asked.push(id);
          return route;
        },
      };
    };
    const start = routed('deliver', item, { prompt: 'a prompt' });
    const out = await store().inbox.acceptArriving([
      arriving('a-1', routed('reject', item, { reason: 'again' })),
      arriving('a-2', start),
      arriving('a-2', routed('ignore', item, { reason: 'twice in one batch' })),
      arriving('a-3', routed('ignore', item, { reason: 'third' })),
    ]);
    expect(out).toEqual(['duplicate', start, 'duplicate', routed('ignore', item, { reason: 'third' })]);
    // The stored one, and the second of a batch, are not routed (again).
    expect(asked).toEqual(['a-2', 'a-3']);
    expect(await store().inbox.get('a-1')).toMatchObject({ route: 'ignore', reason: 'first' });
    expect(await store().inbox.get('a-2')).toMatchObject({ route: 'deliver', status: 'queued' });
    expect(await store().inbox.plan('a-2')).toEqual(start);
    expect(await store().inbox.body('a-3')).toBe('{"id":"a-3"}');
    expect(await store().inbox.acceptArriving([])).toEqual([]);
  });
}

function claimsAndOutcomes(factory: StoreFactory): void {
  const { store } = useStore(factory);

  it("wins a claim only for the first of its work item's line, and answers the claims won in the order asked", async () => {
    const [one, two] = [workItem(), workItem()];
    const a1 = await queue(store().inbox, 'a1', one);
    const a2 = await queue(store().inbox, 'a2', one);
    const b1 = await queue(store().inbox, 'b1', two);
    // a2 waits behind a1 (queued before it); then behind a1 running.
    expect(await store().inbox.applyClaims(onlyClaims(a2, b1, a1))).toEqual([b1, a1]);
    expect(await store().inbox.applyClaims(onlyClaims(a2))).toEqual([]);
    expect(await store().inbox.get('a1')).toMatchObject({ status: 'running', attempts: 1 });
    expect(await store().inbox.applyClaims(onlyClaims(a1))).toEqual([]);
    await store().inbox.finish('a1', { status: 'done', turnId: null, error: null });
    expect(await store().inbox.applyClaims(onlyClaims(a2))).toEqual([a2]);
    expect(ids(await store().inbox.pending())).toEqual(['a2', 'b1']);
  });

  it('sets and clears held notes on queued deliveries only; ignores a queued close with why', async () => {
    const item = workItem();
    const queued = await queue(store().inbox, 'queued', item);
    const running = await queue(store().inbox, 'running');
    await store().inbox.applyClaims(onlyClaims(running));
    await store().inbox.accept(delivery('close', routed('close', item)));
    await store().inbox.applyClaims({
      claims: [],
      held: [
        { deliveryId: 'queued', reason: '2 of 2 turns' },
        { deliveryId: 'running', reason: 'late' },
      ],
      ignored: [{ deliveryId: 'close', reason: 'a turn is running' }],
    });
    expect(await store().inbox.get('queued')).toMatchObject({ status: 'queued', heldReason: '2 of 2 turns' });
    expect(await store().inbox.get('running')).toMatchObject({ status: 'running', heldReason: null });
    expect(await store().inbox.get('close')).toMatchObject({
      status: 'ignored',
      reason: 'a turn is running',
    });
    await store().inbox.applyClaims({
      claims: [],
      held: [{ deliveryId: 'queued', reason: null }],
      ignored: [],
    });
    expect(await store().inbox.get('queued')).toMatchObject({ heldReason: null });
    expect(await store().inbox.applyClaims(onlyClaims(queued))).toEqual([queued]);
  });

  it('records the outcome; a failed delivery retried goes back to its original place in the line', async () => {
    const item = workItem();
    const first = await queue(store().inbox, 'first', item);
    await queue(store().inbox, 'other');
    const second = await queue(store().inbox, 'second', item);
    await store().inbox.applyClaims(onlyClaims(first));
    await store().inbox.finish('first', { status: 'failed', turnId: null, error: 'boom' });
    expect(await store().inbox.get('first')).toMatchObject({ status: 'failed', error: 'boom' });
    expect(ids(await store().inbox.pending())).toEqual(['other', 'second']);
    const seq = (await store().inbox.get('first'))?.seq;

    const retried = await store().inbox.retry('first');
    expect(retried).toMatchObject({ id: 'first', status: 'queued', error: null, seq });
    expect(ids(await store().inbox.pending())).toEqual(['first', 'other', 'second']);
    // Back at its place: it goes before the one that arrived after it.
    expect(await store().inbox.applyClaims(onlyClaims(second, first))).toEqual([first]);
    const s = await openSession(store(), item);
    const turn = await finishedTurn(store(), s);
    await store().inbox.finish('first', { status: 'done', turnId: turn.id, error: null });
    expect(await store().inbox.get('first')).toMatchObject({ status: 'done', attempts: 2, turnId: turn.id });
  });

  it('retries only failed deliveries (usage); requeues only running ones', async () => {
    const queued = await queue(store().inbox, 'queued');
    expect(await outcome(() => store().inbox.retry('queued'))).toBe('usage');
    const running = await queue(store().inbox, 'running');
    await store().inbox.applyClaims(onlyClaims(running));
    expect(await outcome(() => store().inbox.retry('running'))).toBe('usage');
    await settled(store().inbox, 'done', 'done');

    for (const id of ['queued', 'running', 'done']) await store().inbox.requeue(id);
    expect(await store().inbox.get('done')).toMatchObject({ status: 'done' });
    expect(ids(await store().inbox.pending())).toEqual(['queued', 'running']);
    expect((await store().inbox.pending()).map((d) => d.status)).toEqual(['queued', 'queued']);
    expect(await store().inbox.applyClaims(onlyClaims(queued, running))).toEqual([queued, running]);
  });
}

function twoHandlesRestartAndRetention(factory: StoreFactory): void {
  const { store, restart } = useStore(factory, { scrub: scrubCanary });

  it('two handles claiming the same queued delivery at once: exactly one wins', async () => {
    const other = await store().second();
    const claim = await queue(store().inbox, 'd-1');
    const won = await Promise.all([
      store().inbox.applyClaims(onlyClaims(claim)),
      other.inbox.applyClaims(onlyClaims(claim)),
    ]);
    expect(won.flat()).toEqual([claim]);
    expect(await other.inbox.get('d-1')).toMatchObject({ status: 'running', attempts: 1 });
  });

  it("two handles claiming one work item's deliveries at once, in opposite orders: only its first runs", async () => {
    const other = await store().second();
    const item = workItem();
    const first = await queue(store().inbox, 'first', item);
    const second = await queue(store().inbox, 'second', item);
    const won = await Promise.all([
      store().inbox.applyClaims(onlyClaims(first, second)),
      other.inbox.applyClaims(onlyClaims(second, first)),
    ]);
    expect(won.flat()).toEqual([first]);
    expect((await store().inbox.pending()).map((d) => [d.id, d.status])).toEqual([
      ['first', 'running'],
      ['second', 'queued'],
    ]);
  });

  it('two handles accepting one delivery at once: one accepted, one duplicate', async () => {
    const other = await store().second();
    const d = delivery('d-1', routed('deliver', workItem()));
    const outcomes = await Promise.all([store().inbox.accept(d), other.inbox.accept(d)]);
    expect(outcomes.sort()).toEqual(['accepted', 'duplicate']);
    expect(await store().inbox.list()).toHaveLength(1);
  });

  it('deliveries, their plan, status and outcome survive a restart; a running one still runs and can be requeued', async () => {
    const held = await queue(store().inbox, 'held');
    await store().inbox.applyClaims({
      claims: [],
      held: [{ deliveryId: 'held', reason: 'over' }],
      ignored: [],
    });
    const running = await queue(store().inbox, 'running');
    await store().inbox.applyClaims(onlyClaims(running));
    await settled(store().inbox, 'failed', 'failed', 'boom');
    await store().inbox.accept(delivery('rejected', routed('reject', workItem(), { reason: 'no' })));
    const before = await store().inbox.list();
    const plans = await Promise.all(before.map((d) => store().inbox.plan(d.id)));
    const bodies = await Promise.all(before.map((d) => store().inbox.body(d.id)));

    const after = (await restart()).inbox;
    expect(await after.list()).toEqual(before);
    expect(await Promise.all(before.map((d) => after.plan(d.id)))).toEqual(plans);
    expect(await Promise.all(before.map((d) => after.body(d.id)))).toEqual(bodies);
    expect(await after.accept(delivery('held', routed('deliver', workItem())))).toBe('duplicate');
    expect((await after.pending()).map((d) => [d.id, d.status])).toEqual([
      ['held', 'queued'],
      ['running', 'running'],
    ]);
    await after.requeue('running');
    expect(await after.applyClaims(onlyClaims(running, held))).toEqual([running, held]);
    expect(await after.get('running')).toMatchObject({ status: 'running', attempts: 2 });
    expect((await after.retry('failed')).status).toBe('queued');
  });

  it('retention drops the bodies and plans of old finished deliveries, keeps their rows, and says so', async () => {
    await settled(store().inbox, 'done', 'done');
    await settled(store().inbox, 'failed', 'failed');
    const kept = await queue(store().inbox, 'queued');
    const now = new Date(Date.now() + 40 * DAY);
    expect(await store().inbox.prune({ retainDays: 0, now })).toMatchObject({ cutoff: null, pruned: 0 });
    const dry = await store().inbox.prune({ retainDays: 30, now, dryRun: true });
    expect(dry).toMatchObject({ pruned: 2, dryRun: true });
    expect(await store().inbox.body('done')).toBeDefined();
    const report = await store().inbox.prune({ retainDays: 30, now });
    expect(report).toMatchObject({ pruned: 2, more: false, dryRun: false });
    expect(report.bytes).toBeGreaterThan(0);
    expect(await store().inbox.prune({ retainDays: 30, now })).toMatchObject({ pruned: 0 });

    const after = (await restart()).inbox;
    expect(await after.get('done')).toMatchObject({ status: 'done' });
    expect((await after.get('done'))?.prunedAt).not.toBeNull();
    expect(await after.body('done')).toBeUndefined();
    expect(await after.plan('done')).toBeUndefined();
    expect(await outcome(() => after.readBody('done'))).toBe('delivery-pruned');
    expect(await outcome(() => after.retry('failed'))).toBe('delivery-pruned');
    expect(await after.plan('queued')).toMatchObject({ action: 'deliver', workItem: kept.workItem });
    expect(await after.body('queued')).toBeDefined();
  });

  it('what came from outside passes through the scrubber before it is kept', async () => {
    const item = workItem();
    const body = JSON.stringify({ comment: { body: `here is my key ${CANARY}` } });
    await store().inbox.accept(delivery('d-1', routed('deliver', item, { prompt: `> ${CANARY}` }), body));
    await store().inbox.accept(delivery('d-2', routed('reject', item, { reason: `bad ${CANARY}` })));
    await store().inbox.applyClaims({
      claims: [],
      held: [{ deliveryId: 'd-1', reason: CANARY }],
      ignored: [],
    });
    await settled(store().inbox, 'd-3', 'failed', `401 ${CANARY}`);

    const after = (await restart()).inbox;
    const stored = await after.body('d-1');
    expect(JSON.parse(stored ?? '')).toEqual({ comment: { body: 'here is my key [redacted]' } });
    expect((await after.plan('d-1'))?.prompt).toBe('> [redacted]');
    const kept = JSON.stringify([await after.list(), stored, await after.plan('d-1')]);
    expect(kept).toContain('[redacted]');
    expect(kept).not.toContain(CANARY);
    const contents = await (await restart()).contents?.();
    if (contents !== undefined) expect(contents).not.toContain(CANARY);
  });

  it('a body given as bytes is scrubbed as text is', async () => {
    const json = JSON.stringify({ comment: { body: `here is my key ${CANARY}` } });
    await store().inbox.accept({
      ...delivery('d-1', routed('deliver', workItem())),
      body: Buffer.from(json),
    });
    const stored = await (await restart()).inbox.body('d-1');
    expect(JSON.parse(stored ?? '')).toEqual({ comment: { body: 'here is my key [redacted]' } });
    const contents = await (await restart()).contents?.();
    if (contents !== undefined) expect(contents).not.toContain(CANARY);
  });
}
