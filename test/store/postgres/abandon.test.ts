/**
 * `PgAbandon.interruptAbandoned` (issue 17): what a surviving host settles of a dead host's work
 * item, in one transaction, once. Host a holds three work items (1 s leases), dies (its leases
 * expire and are reaped), and host b recovers each.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Abandoned } from '../../../src/core/ports/hosts.js';
import { PgAbandon } from '../../../src/store/postgres/abandon.js';
import { claimOf, delivery, onlyClaims, routed } from '../contract/fixtures.js';
import { type Host, LEASE_SECONDS, newSession, sleep, turnEnd, turnInput, twoHosts } from './fence-setup.js';

const TMUX = 'github:octo/widgets#1';
const IDLE = 'github:octo/widgets#2';
const ENDED = 'github:octo/widgets#3';
let a: Host;
let b: Host;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ a, b, close } = await twoHosts());
});
afterEach(async () => close());

const statusOf = async (id: string) => (await b.inbox.get(id))?.status;

/** a's work: a tmux turn running (d-1), a claimed delivery never begun (d-2), a turn ended but not settled (d-3). */
async function aDies(): Promise<{ tmuxTurn: number; endedTurn: number; tmux: string; idle: string }> {
  for (const w of [TMUX, IDLE, ENDED]) await a.acquire(w);
  const tmux = await a.sessions.create(newSession(TMUX, { runner: 'tmux' }));
  const idle = await a.sessions.create(newSession(IDLE));
  const ended = await a.sessions.create(newSession(ENDED));
  const items: Array<[string, string]> = [
    ['d-1', TMUX],
    ['d-2', IDLE],
    ['d-3', ENDED],
  ];
  for (const [id, w] of items) await a.inbox.accept(delivery(id, routed('deliver', w)));
  await a.inbox.accept(delivery('d-4', routed('deliver', IDLE)));
  const claims = items.map(([id, w]) => claimOf(id, w));
  expect(await a.inbox.applyClaims(onlyClaims(...claims))).toHaveLength(3);
  const tmuxTurn = await a.sessions.beginTurn(tmux.id, turnInput('d-1'));
  const endedTurn = await a.sessions.beginTurn(ended.id, turnInput('d-3'));
  await a.sessions.finishTurn(endedTurn.id, turnEnd());
  await sleep(LEASE_SECONDS * 1000 + 150);
  return { tmuxTurn: tmuxTurn.id, endedTurn: endedTurn.id, tmux: tmux.id, idle: idle.id };
}

describe('interruptAbandoned', () => {
  it("interrupts the dead host's turns, fails their deliveries, requeues the unbegun, loses tmux sessions", async () => {
    const { tmuxTurn, endedTurn, tmux, idle } = await aDies();
    const abandoned = await b.hosts.reapExpired(0);
    expect(abandoned.map((x) => [x.workItem, x.hostId, x.epoch])).toEqual([
      [TMUX, 'a', 1],
      [IDLE, 'a', 1],
      [ENDED, 'a', 1],
    ]);
    const recovery = new PgAbandon(b.db);
    const of = (w: string) => abandoned.find((x) => x.workItem === w) as Abandoned;
    expect(await recovery.interruptAbandoned(of(TMUX))).toEqual({
      turns: [tmuxTurn],
      failed: ['d-1'],
      requeued: [],
      settled: [],
      lostSessions: [tmux],
      heldSessions: [],
    });
    expect(await recovery.interruptAbandoned(of(IDLE))).toEqual({
      turns: [],
      failed: [],
      requeued: ['d-2'],
      settled: [],
      lostSessions: [],
      heldSessions: [],
    });
    expect(await recovery.interruptAbandoned(of(ENDED))).toMatchObject({ settled: ['d-3'], requeued: [] });

    const turn = (await b.sessions.turns(tmux)).at(-1);
    expect(turn).toMatchObject({ id: tmuxTurn, status: 'failed', endReason: 'interrupted' });
    expect(turn?.error).toMatch(/host a .*github:octo\/widgets#1/);
    expect(await b.inbox.get('d-1')).toMatchObject({
      status: 'failed',
      turnId: tmuxTurn,
      error: turn?.error,
    });
    expect(await statusOf('d-2')).toBe('queued');
    expect(await statusOf('d-4')).toBe('queued');
    expect(await b.inbox.get('d-3')).toMatchObject({ status: 'done', turnId: endedTurn });
    expect((await b.sessions.get(tmux))?.status).toBe('lost');
    expect((await b.sessions.get(idle))?.status).toBe('active');
    const drives = await b.db.rows<{ turn_id: number; reason: string }>(
      'SELECT turn_id, reason FROM unmetered_drives ORDER BY turn_id',
    );
    expect(drives.map((d) => d.turn_id)).toEqual([tmuxTurn]);
    expect(drives[0]?.reason).toMatch(/^interrupted: host a /);

    // Idempotent: a second call does nothing.
    for (const w of [TMUX, IDLE, ENDED]) {
      expect(await recovery.interruptAbandoned(of(w))).toEqual({
        turns: [],
        failed: [],
        requeued: [],
        settled: [],
        lostSessions: [],
        heldSessions: [],
      });
    }
    expect(await statusOf('d-2')).toBe('queued');
  });

  it('reaped and settled in one transaction: a host taking the work item waits, then finds the unbegun delivery back in line', async () => {
    const { tmuxTurn } = await aDies();
    const recovery = new PgAbandon(b.db);
    // b reaps and settles while a (back from the dead: a new incarnation) tries to take IDLE at once.
    const [reaped] = await Promise.all([recovery.reapAndSettle(0), b.acquire(IDLE)]);
    expect(reaped.map((x) => x.workItem)).toEqual([TMUX, IDLE, ENDED]);
    // Whoever holds IDLE now, its claimed-but-unbegun delivery went back in line (never left running).
    expect(await statusOf('d-2')).toBe('queued');
    expect(await statusOf('d-1')).toBe('failed');
    expect((await b.sessions.turns((await b.sessions.findActive(ENDED))?.id ?? ''))[0]?.status).toBe(
      'succeeded',
    );
    expect(tmuxTurn).toBeGreaterThan(0);
    // Settled once: a second reap finds nothing.
    expect(await recovery.reapAndSettle(0)).toEqual([]);
  });

  it('once another host took the work item, only what the dead host ran is settled', async () => {
    const { tmuxTurn } = await aDies();
    const abandoned = await b.hosts.reapExpired(0);
    for (const w of [TMUX, IDLE]) await b.acquire(w);
    const recovery = new PgAbandon(b.db);
    const of = (w: string) => abandoned.find((x) => x.workItem === w) as Abandoned;
    // Its interrupted turn's delivery and session are surely a's; an unbegun running delivery may be b's.
    expect(await recovery.interruptAbandoned(of(TMUX))).toMatchObject({
      turns: [tmuxTurn],
      failed: ['d-1'],
      lostSessions: [expect.any(String)],
    });
    expect(await recovery.interruptAbandoned(of(IDLE))).toMatchObject({ turns: [], requeued: [] });
    expect(await statusOf('d-2')).toBe('running');
  });

  it("leaves another host's turns and a later holding's turns alone", async () => {
    await a.acquire(TMUX);
    const session = await a.sessions.create(newSession(TMUX));
    const running = await a.sessions.beginTurn(session.id, turnInput());
    // An abandonment of an earlier epoch than the turn's, or of another host, is not this turn's.
    const recovery = new PgAbandon(b.db);
    expect(await recovery.interruptAbandoned({ workItem: TMUX, hostId: 'b', epoch: 1 })).toMatchObject({
      turns: [],
    });
    expect(await recovery.interruptAbandoned({ workItem: TMUX, hostId: 'a', epoch: 0 })).toMatchObject({
      turns: [],
    });
    expect((await b.sessions.turns(session.id)).map((t) => [t.id, t.status])).toEqual([
      [running.id, 'running'],
    ]);
  });
});
