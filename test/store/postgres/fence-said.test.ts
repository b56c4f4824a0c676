/**
 * Invariant 7 on a shared store: a fenced write that changes nothing is said, never silent. The
 * PostgreSQL stores tell the fence what they did not write (the work item, the epoch, what), and
 * the lease keeper warns once per turn, delivery or claim. A write that found nothing to change
 * for another reason (a claim behind its line, a delivery already settled) is not a refusal.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LeaseKeeper } from '../../../src/hosts/keeper.js';
import type { Logger } from '../../../src/log/logger.js';
import { claimOf, delivery, onlyClaims, routed } from '../contract/fixtures.js';
import { type Host, LEASE_SECONDS, newSession, sleep, turnEnd, turnInput, twoHosts } from './fence-setup.js';

const WI = 'github:octo/widgets#11';
let a: Host;
let b: Host;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ a, b, close } = await twoHosts());
});
afterEach(async () => close());

describe('fenced writes are said', () => {
  it("a turn's events, pid and end, once its lease lapsed, each named with the work item and the turn's epoch", async () => {
    await a.acquire(WI);
    const session = await a.sessions.create(newSession(WI));
    const turn = await a.sessions.beginTurn(session.id, turnInput());
    await a.sessions.appendEvent(turn.id, { type: 'text', text: 'working' });
    expect(a.fence.refusals).toEqual([]);
    await sleep(LEASE_SECONDS * 1000 + 150);

    await a.sessions.appendEvent(turn.id, { type: 'text', text: 'still working' });
    await a.sessions.setTurnPid(turn.id, 4242);
    await a.sessions.finishTurn(turn.id, turnEnd());
    expect(a.fence.refusals).toEqual([
      {
        workItem: WI,
        epoch: 1,
        what: `the events of turn ${turn.id} (host a)`,
        key: `turn ${turn.id} the events`,
      },
      { workItem: WI, epoch: 1, what: `the pid of turn ${turn.id} (host a)`, key: `turn ${turn.id} the pid` },
      {
        workItem: WI,
        epoch: 1,
        what: `the end (succeeded, result) of turn ${turn.id} (host a)`,
        key: `turn ${turn.id} the end (succeeded, result)`,
      },
    ]);
  });

  it("a delivery's settling and a claim under a lease not held; not a claim behind its line, nor a delivery already settled", async () => {
    await a.acquire(WI);
    await a.inbox.accept(delivery('d-1', routed('deliver', WI)));
    await a.inbox.accept(delivery('d-2', routed('deliver', WI)));
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-1', WI)))).toHaveLength(1);
    // Held: d-2 waits behind d-1 (not a refusal).
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-2', WI)))).toEqual([]);
    expect(a.fence.refusals).toEqual([]);

    // a is fenced (its epoch dropped): the settling and a claim change nothing, and say so.
    a.fence.epochs.delete(WI);
    await a.inbox.finish('d-1', { status: 'done', turnId: null, error: null });
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-2', WI)))).toEqual([]);
    expect((await a.inbox.get('d-1'))?.status).toBe('running');
    expect(a.fence.refusals).toEqual([
      { workItem: WI, epoch: null, what: 'the settling of delivery d-1 (done)', key: 'delivery d-1' },
      { workItem: WI, epoch: null, what: 'the claim of delivery d-2', key: `claim ${WI} none` },
    ]);

    // Held again: settled; settling it once more finds it done (not a refusal).
    a.fence.epochs.set(WI, 1);
    await a.inbox.finish('d-1', { status: 'done', turnId: null, error: null });
    await a.inbox.finish('d-1', { status: 'done', turnId: null, error: null });
    expect(a.fence.refusals).toHaveLength(2);
    expect((await a.inbox.get('d-1'))?.status).toBe('done');
  });

  it('the lease keeper warns once per key, naming the work item, the epoch and what was not written', async () => {
    const warned: Array<[string, Record<string, unknown> | undefined]> = [];
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: (message, fields) => warned.push([message, fields]),
      error: () => {},
      child: () => logger,
    };
    const keeper = new LeaseKeeper(b.hosts, { host: 'k', leaseSeconds: 30, heartbeatSeconds: 10 });
    await keeper.start({
      info: { labels: [], engines: [], capacity: 1, address: null },
      logger,
      needsOf: async () => ({ engine: 'claude', labels: [] }),
      hasActiveSession: async () => false,
      onFenced: () => {},
      interruptAbandoned: async () => {},
    });
    try {
      const refusal = {
        workItem: WI,
        epoch: 3,
        what: 'the events of turn 7 (host k)',
        key: 'turn 7 the events',
      };
      keeper.refused(refusal);
      keeper.refused({ ...refusal, what: 'the events of turn 7 (host k), again' });
      keeper.refused({ ...refusal, what: 'the end of turn 7', key: 'turn 7 the end' });
      expect(warned.filter(([m]) => m.startsWith('fenced: not written'))).toEqual([
        [
          expect.any(String),
          { host: 'k', workItem: WI, epoch: 3, notWritten: 'the events of turn 7 (host k)' },
        ],
        [expect.any(String), { host: 'k', workItem: WI, epoch: 3, notWritten: 'the end of turn 7' }],
      ]);
    } finally {
      keeper.stop();
    }
  });
});
