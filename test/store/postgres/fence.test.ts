/**
 * Fencing in the PostgreSQL session store and inbox (issue 17): with a `Fence`, a host writes for a
 * work item only while it holds the item's lease at its epoch. Two hosts on one database, real
 * leases (1 s), expiry and reaping waited for in real time.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PgAbandon } from '../../../src/store/postgres/abandon.js';
import { claimOf, delivery, onlyClaims, routed } from '../contract/fixtures.js';
import { type Host, LEASE_SECONDS, newSession, sleep, turnEnd, turnInput, twoHosts } from './fence-setup.js';

const WI = 'github:octo/widgets#7';
let a: Host;
let b: Host;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ a, b, close } = await twoHosts());
});
afterEach(async () => close());

const turnRow = async (id: number) =>
  a.db.row<{ status: string; host_id: string | null; epoch: number | null; pid: number | null }>(
    'SELECT status, host_id, epoch, pid FROM turns WHERE id = $1',
    [id],
  );
const eventCount = async (id: number) =>
  (await a.db.row<{ n: number }>('SELECT COUNT(*) AS n FROM turn_events WHERE turn_id = $1', [id]))?.n;
const statusOf = async (id: string) => (await a.inbox.get(id))?.status;
const expire = () => sleep(LEASE_SECONDS * 1000 + 150);

describe('fenced beginnings', () => {
  it('a session and a turn begin only under the lease; the turn records its host and epoch', async () => {
    await expect(a.sessions.create(newSession(WI))).rejects.toMatchObject({ code: 'fenced' });
    expect(await a.sessions.findActive(WI)).toBeUndefined();
    expect(await a.acquire(WI)).toBe(1);
    const session = await a.sessions.create(newSession(WI));
    const turn = await a.sessions.beginTurn(session.id, turnInput());
    expect(await turnRow(turn.id)).toMatchObject({ status: 'running', host_id: 'a', epoch: 1 });
    await a.sessions.finishTurn(turn.id, turnEnd());
    // Host b holds no lease of it: nothing written, and the error names the work item and the host.
    const refused = b.sessions.beginTurn(session.id, turnInput());
    await expect(refused).rejects.toMatchObject({ code: 'fenced' });
    await expect(refused).rejects.toThrow(/host b .*github:octo\/widgets#7/);
    // A stale epoch is refused as an absent one is.
    a.fence.epochs.set(WI, 0);
    await expect(a.sessions.beginTurn(session.id, turnInput())).rejects.toMatchObject({ code: 'fenced' });
    expect((await a.sessions.turns(session.id)).length).toBe(1);
  });

  it('a stale epoch changes nothing: a turn end, pid, event, session column, claim, finish', async () => {
    await a.acquire(WI);
    const session = await a.sessions.create(newSession(WI));
    await a.inbox.accept(delivery('d-1', routed('deliver', WI)));
    await a.inbox.accept(delivery('d-2', routed('deliver', WI)));
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-1', WI)))).toHaveLength(1);
    const turn = await a.sessions.beginTurn(session.id, turnInput('d-1'));
    await a.sessions.appendEvent(turn.id, { type: 'diagnostic', message: 'one' });
    await expire(); // a's lease expired (not reaped): its writes are fenced
    await a.sessions.appendEvent(turn.id, { type: 'diagnostic', message: 'two' });
    await a.sessions.setTurnPid(turn.id, 4242);
    await a.sessions.setUsageBaseline(session.id, { inputTokens: 5 } as never);
    await a.sessions.markEngineSessionStarted(session.id, 'engine-1');
    const finished = await a.sessions.finishTurn(turn.id, turnEnd());
    expect(finished.status).toBe('running');
    expect(await turnRow(turn.id)).toMatchObject({ status: 'running', pid: null });
    expect(await eventCount(turn.id)).toBe(1);
    expect(await a.sessions.get(session.id)).toMatchObject({ engineSessionId: null, usageBaseline: null });
    await a.inbox.finish('d-1', { status: 'done', turnId: turn.id, error: null });
    await a.inbox.requeue('d-1');
    expect(await statusOf('d-1')).toBe('running');
    // Late is lost: a heartbeat does not renew an expired lease (the reaper settles it: interrupted,
    // never re-run), and a's writes stay fenced.
    expect(await a.hosts.heartbeat('a', a.incarnation, 60)).toEqual([]);
    expect((await a.sessions.finishTurn(turn.id, turnEnd())).status).toBe('running');
    a.fence.epochs.set(WI, 0);
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-2', WI)))).toEqual([]);
    expect(await statusOf('d-2')).toBe('queued');
  });
});

describe('a host returning after its lease was taken', () => {
  it("a's late writes are not applied; b's are", async () => {
    await a.acquire(WI);
    const session = await a.sessions.create(newSession(WI));
    for (const id of ['d-1', 'd-2', 'd-3']) await a.inbox.accept(delivery(id, routed('deliver', WI)));
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-1', WI)))).toHaveLength(1);
    const late = await a.sessions.beginTurn(session.id, turnInput('d-1'));
    await expire();
    const abandoned = await b.hosts.reapExpired(0);
    expect(abandoned).toEqual([{ workItem: WI, hostId: 'a', epoch: 1 }]);
    const settled = await new PgAbandon(b.db).interruptAbandoned(abandoned[0] as never);
    expect(settled).toMatchObject({ turns: [late.id], failed: ['d-1'], lostSessions: [] });
    expect(await b.acquire(WI)).toBe(2);
    // a comes back: its heartbeat renews nothing taken from it; its writes are fenced.
    expect(await a.hosts.heartbeat('a', a.incarnation, 60)).toEqual([]);
    expect((await a.sessions.finishTurn(late.id, turnEnd())).endReason).toBe('interrupted');
    await a.inbox.finish('d-1', { status: 'done', turnId: late.id, error: null });
    expect(await statusOf('d-1')).toBe('failed');
    expect(await a.inbox.applyClaims(onlyClaims(claimOf('d-2', WI)))).toEqual([]);
    await expect(a.sessions.beginTurn(session.id, turnInput())).rejects.toMatchObject({ code: 'fenced' });
    // b, the owner now, runs the line on (a process-runner session moves with the work item).
    expect(await b.inbox.applyClaims(onlyClaims(claimOf('d-2', WI)))).toHaveLength(1);
    const turn = await b.sessions.beginTurn(session.id, turnInput('d-2'));
    expect(await turnRow(turn.id)).toMatchObject({ host_id: 'b', epoch: 2 });
    await a.sessions.appendEvent(turn.id, { type: 'diagnostic', message: 'from a' });
    await b.sessions.appendEvent(turn.id, { type: 'diagnostic', message: 'from b' });
    expect(await eventCount(turn.id)).toBe(1);
    await a.inbox.requeue('d-2');
    expect(await statusOf('d-2')).toBe('running');
    expect((await b.sessions.finishTurn(turn.id, turnEnd())).status).toBe('succeeded');
    await a.inbox.finish('d-2', { status: 'failed', turnId: turn.id, error: 'late' });
    await b.inbox.finish('d-2', { status: 'done', turnId: turn.id, error: null });
    expect(await statusOf('d-2')).toBe('done');
    await a.inbox.finish('d-2', { status: 'failed', turnId: turn.id, error: 'late' });
    expect(await statusOf('d-2')).toBe('done');
  });
});

describe('host-scoped recovery', () => {
  it("another host's running turn is never judged by this host's process table", async () => {
    await a.acquire(WI);
    const session = await a.sessions.create(newSession(WI));
    const theirs = await a.sessions.beginTurn(session.id, turnInput());
    // A turn written before hosts (no fence, no host recorded) is every host's to recover.
    const { PgSessionStore } = await import('../../../src/store/postgres/sessions.js');
    const oneHost = new PgSessionStore(b.db, { scrub: (t) => t, ownerPid: 900003 });
    const old = await oneHost.create(newSession('github:octo/widgets#8'));
    const before = await oneHost.beginTurn(old.id, turnInput());
    const dead = () => false;
    expect(await b.sessions.anyTurnOrphaned(dead)).toBe(true);
    expect((await b.sessions.orphanTurns(dead, ['process'])).map((t) => t.id)).toEqual([before.id]);
    expect(await b.sessions.recoverLostTurns(dead)).toBe(1);
    expect(await b.sessions.anyTurnOrphaned(dead)).toBe(false);
    expect(await turnRow(theirs.id)).toMatchObject({ status: 'running', host_id: 'a' });
    expect(await turnRow(before.id)).toMatchObject({ status: 'failed' });
    // Nor adopted by it, nor its events forgotten by it.
    await a.sessions.appendEvent(theirs.id, { type: 'diagnostic', message: 'kept' });
    await b.sessions.adoptTurn(theirs.id);
    await b.sessions.clearEvents(theirs.id);
    const owner = await a.db.row<{ owner_pid: number }>('SELECT owner_pid FROM turns WHERE id = $1', [
      theirs.id,
    ]);
    expect(owner?.owner_pid).toBe(900001);
    expect(await eventCount(theirs.id)).toBe(1);
    // Its own host judges it; a store without a fence judges every turn, as on one host.
    expect((await a.sessions.orphanTurns(dead, ['process'])).map((t) => t.id)).toEqual([theirs.id]);
    expect(await oneHost.anyTurnOrphaned(dead)).toBe(true);
  });
});
