/**
 * A delivery stuck `running` on the host that holds its work item (issue 17): its final settling
 * was fenced (or failed) while the host kept its lease, and no turn of the host runs it. The
 * holder's sweep (`PgAbandon.settleStranded`, called by the dispatcher through its lease gate)
 * settles it: as its turn ended; interrupted (never run again) when its turn is still recorded
 * running; back in line when it never began one. Real PostgreSQL, two hosts.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Inbox } from '../../../src/core/ports/inbox.js';
import type { SessionRecord } from '../../../src/core/ports/sessions.js';
import { Dispatcher } from '../../../src/dispatch/dispatcher.js';
import type { LeaseGate } from '../../../src/dispatch/dispatcher-deps.js';
import { nullLogger } from '../../../src/log/logger.js';
import { PgAbandon } from '../../../src/store/postgres/abandon.js';
import { claimOf, delivery, onlyClaims, routed } from '../contract/fixtures.js';
import { type Host, newSession, turnEnd, turnInput, twoHosts } from './fence-setup.js';

const WI = 'github:octo/widgets#9';
let a: Host;
let b: Host;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ a, b, close } = await twoHosts());
  await a.acquire(WI);
  // Long enough for the test: the fenced writes below fail by the fence, not by expiry.
  await a.hosts.heartbeat('a', a.incarnation, 60);
});
afterEach(async () => close());

const statusOf = async (id: string) => (await a.inbox.get(id))?.status;

/** `d-1` and `d-2` queued on WI, `d-1` claimed by a. */
async function claimed(): Promise<SessionRecord> {
  await a.inbox.accept(delivery('d-1', routed('deliver', WI)));
  await a.inbox.accept(delivery('d-2', routed('deliver', WI)));
  expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-1', WI)))).toHaveLength(1);
  return a.sessions.create(newSession(WI));
}

/** A write of a while its epoch is dropped (self-fenced), then held again as before. */
async function whileFenced(write: () => Promise<unknown>): Promise<void> {
  const epoch = a.fence.epochs.get(WI) as number;
  a.fence.epochs.delete(WI);
  try {
    await write();
  } finally {
    a.fence.epochs.set(WI, epoch);
  }
}

const held = () => ({ workItem: WI, hostId: 'a', epoch: a.fence.epochs.get(WI) as number });

describe('settleStranded', () => {
  it('leaves a tmux turn recorded running alone (its TUI may run on, to be adopted), and says what blocks', async () => {
    await a.inbox.accept(delivery('d-1', routed('deliver', WI)));
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-1', WI)))).toHaveLength(1);
    const session = await a.sessions.create(newSession(WI, { runner: 'tmux' }));
    const turn = await a.sessions.beginTurn(session.id, turnInput('d-1'));
    const done = await new PgAbandon(a.db).settleStranded(held());
    expect(done).toMatchObject({ turns: [], failed: [], requeued: [], settled: [] });
    expect(done.blockedBy).toEqual({ turnId: turn.id, hostId: 'a', runner: 'tmux' });
    expect((await a.sessions.turns(session.id)).at(-1)?.status).toBe('running');
    expect(await statusOf('d-1')).toBe('running');
  });

  it('settles a delivery whose turn ended but whose settling was fenced, as the turn ended', async () => {
    const session = await claimed();
    const turn = await a.sessions.beginTurn(session.id, turnInput('d-1'));
    await a.sessions.finishTurn(turn.id, turnEnd());
    await whileFenced(() => a.inbox.finish('d-1', { status: 'done', turnId: turn.id, error: null }));
    expect(await statusOf('d-1')).toBe('running');

    const done = await new PgAbandon(a.db).settleStranded(held());
    expect(done).toEqual({
      turns: [],
      failed: [],
      requeued: [],
      settled: ['d-1'],
      lostSessions: [],
      heldSessions: [],
    });
    expect(await a.inbox.get('d-1')).toMatchObject({ status: 'done', turnId: turn.id });
    // The line moves on.
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-2', WI)))).toHaveLength(1);
  });

  it('interrupts a turn still recorded running (never run again) and fails its delivery', async () => {
    const session = await claimed();
    const turn = await a.sessions.beginTurn(session.id, turnInput('d-1'));
    const done = await new PgAbandon(a.db).settleStranded(held());
    expect(done).toMatchObject({ turns: [turn.id], failed: ['d-1'], requeued: [], settled: [] });
    const [row] = await a.sessions.turnsForDelivery('d-1');
    expect(row).toMatchObject({ status: 'failed', endReason: 'interrupted' });
    expect(row?.error).toMatch(/host a holds github:octo\/widgets#9 \(epoch 1\)/);
    expect(await a.inbox.get('d-1')).toMatchObject({ status: 'failed', turnId: turn.id, error: row?.error });
    const drives = await a.db.rows<{ turn_id: number }>('SELECT turn_id FROM unmetered_drives');
    expect(drives.map((d) => d.turn_id)).toEqual([turn.id]);
    // The session stays active (it is this host's).
    expect((await a.sessions.get(session.id))?.status).toBe('active');
  });

  it('puts a delivery that never began a turn back in its place; fails one whose turn was lost', async () => {
    await claimed();
    expect(await new PgAbandon(a.db).settleStranded(held())).toMatchObject({ requeued: ['d-1'] });
    expect(await statusOf('d-1')).toBe('queued');

    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-1', WI)))).toHaveLength(1);
    const session = (await a.sessions.findActive(WI)) as SessionRecord;
    const turn = await a.sessions.beginTurn(session.id, turnInput('d-1'));
    await a.sessions.markTurnLost(turn.id, 'its process vanished');
    expect(await new PgAbandon(a.db).settleStranded(held())).toMatchObject({
      settled: ['d-1'],
      requeued: [],
    });
    expect(await a.inbox.get('d-1')).toMatchObject({
      status: 'failed',
      turnId: turn.id,
      error: 'its process vanished',
    });
  });

  it('changes nothing unless the lease is held at that epoch', async () => {
    await claimed();
    const recovery = new PgAbandon(b.db);
    expect(await recovery.settleStranded({ workItem: WI, hostId: 'b', epoch: 1 })).toMatchObject({
      requeued: [],
    });
    expect(await recovery.settleStranded({ workItem: WI, hostId: 'a', epoch: 2 })).toMatchObject({
      requeued: [],
    });
    expect(await statusOf('d-1')).toBe('running');
  });
});

describe('the dispatcher sweeps what it does not run', () => {
  it('a delivery whose settling was fenced while the host kept its lease no longer blocks its line', async () => {
    await a.inbox.accept(delivery('d-1', routed('deliver', WI)));
    await a.inbox.accept(delivery('d-2', routed('deliver', WI)));
    const ran: string[] = [];
    // The host is fenced just while d-1's delivery is settled, then holds its lease again.
    const inbox: Inbox = Object.create(a.inbox, {
      finish: {
        value: (id: string, result: Parameters<Inbox['finish']>[1]) =>
          id === 'd-1' ? whileFenced(() => a.inbox.finish(id, result)) : a.inbox.finish(id, result),
      },
    });
    const recovery = new PgAbandon(a.db);
    const gate: LeaseGate = {
      owned: async (candidates) =>
        new Set(candidates.map((c) => c.workItem).filter((w) => a.fence.epochOf(w) !== undefined)),
      settle: async () => {},
      holds: (w) => a.fence.epochOf(w) !== undefined,
      settleStranded: async (w) => {
        const done = await recovery.settleStranded({ ...held(), workItem: w });
        return done.failed.length + done.settled.length + done.requeued.length;
      },
    };
    const dispatcher = new Dispatcher({
      inbox,
      store: a.sessions,
      runTurn: async (request) => {
        ran.push(request.deliveryId ?? '');
        const session =
          (await a.sessions.findActive(request.workItem)) ?? (await a.sessions.create(newSession(WI)));
        const turn = await a.sessions.beginTurn(session.id, turnInput(request.deliveryId));
        const finished = await a.sessions.finishTurn(turn.id, turnEnd());
        return {
          session,
          turn: finished,
          created: false,
          outcome: {
            ok: true,
            endReason: 'result',
            endedAt: new Date(),
            exitCode: 0,
            exitSignal: null,
            error: null,
            stoppedBy: 'exit',
          },
        };
      },
      leases: gate,
      logger: nullLogger,
      concurrency: 2,
      closeGraceMs: 60_000,
      pollMs: 60_000,
    });
    await dispatcher.start();
    await dispatcher.idle();
    await dispatcher.stop(0);
    expect(ran).toEqual(['d-1', 'd-2']);
    expect(await statusOf('d-1')).toBe('done');
    expect(await statusOf('d-2')).toBe('done');
  });
});
