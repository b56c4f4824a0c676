/**
 * `PgAbandon.interruptAbandoned` (issue 17): what a surviving host settles of a dead host's work
 * item, in one transaction, once. Host a holds three work items (1 s leases), dies (its leases
 * expire and are reaped), and host b recovers each.
 */
import pg from 'pg';
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
let url: string;

beforeEach(async () => {
  ({ a, b, close, url } = await twoHosts());
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

  it('reaped and settled in one transaction per lease: a host taking the work item waits for the settling, then finds the unbegun delivery back in line', async () => {
    await aDies();
    const recovery = new PgAbandon(b.db);
    // Forced: a second client holds IDLE's unbegun delivery, so the reaper has ended IDLE's lease
    // (its row locked) and waits to settle it; b then tries to take IDLE.
    const blocker = new pg.Client({ connectionString: url });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query("SELECT id FROM deliveries WHERE id = 'd-2' FOR UPDATE");
      const reaping = recovery.reapAndSettle(0);
      await waitForWaiters(1);
      const taking = b.acquire(IDLE);
      // The take-over waits on the reaped lease's row: it cannot take IDLE before IDLE is settled.
      await waitForWaiters(2);
      expect(await statusOf('d-2')).toBe('running');
      await blocker.query('COMMIT');
      expect((await reaping).map((x) => x.workItem)).toEqual([TMUX, IDLE, ENDED]);
      expect(await taking).toBe(2);
    } finally {
      await blocker.end();
    }
    // Taken after the settling committed: its claimed-but-unbegun delivery went back in line.
    expect(await statusOf('d-2')).toBe('queued');
    expect(await statusOf('d-1')).toBe('failed');
    expect(await statusOf('d-3')).toBe('done');
    // Settled once: a second reap finds nothing.
    expect(await recovery.reapAndSettle(0)).toEqual([]);
  });

  it('one lease failing to settle does not hold back the others; it stays unreaped and the next reap settles it', async () => {
    await aDies();
    // Settling IDLE fails: its unbegun delivery cannot be written.
    await b.db.run(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused %', NEW.id; END $$`);
    await b.db.run(`CREATE TRIGGER refuse BEFORE UPDATE ON deliveries FOR EACH ROW
      WHEN (NEW.id = 'd-2') EXECUTE FUNCTION refuse()`);
    const recovery = new PgAbandon(b.db);
    const failed: Array<[string, string]> = [];
    const reaped = await recovery.reapAndSettle(0, (x, error) =>
      failed.push([x.workItem, (error as Error).message]),
    );
    expect(reaped.map((x) => x.workItem)).toEqual([TMUX, ENDED]);
    expect(failed).toEqual([[IDLE, 'refused d-2']]);
    expect(await statusOf('d-1')).toBe('failed');
    expect(await statusOf('d-3')).toBe('done');
    expect(await statusOf('d-2')).toBe('running');
    // Rolled back whole: IDLE's lease is not ended, so no host may take it unsettled.
    expect((await b.hosts.lease(IDLE))?.ended).toBe(false);
    await expect(b.acquire(IDLE)).rejects.toThrow(/could not take/);

    await b.db.run('DROP TRIGGER refuse ON deliveries');
    expect((await recovery.reapAndSettle(0)).map((x) => x.workItem)).toEqual([IDLE]);
    expect(await statusOf('d-2')).toBe('queued');
  });

  it('passes over a lease another reaper holds, settling the rest without waiting for it', async () => {
    await aDies();
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    let waited = false;
    try {
      // Another host's reaper is settling IDLE (its lease row locked until it commits).
      await other.query('BEGIN');
      await other.query('SELECT work_item FROM leases WHERE work_item = $1 FOR UPDATE', [IDLE]);
      const reaping = new PgAbandon(b.db).reapAndSettle(0);
      let done = false;
      void reaping.finally(() => {
        done = true;
      });
      // Were this reap to wait on the other's lock, it is seen waiting (and the lock let go, so
      // the test ends and says so).
      while (!done) {
        if ((await waiters()) > 0) {
          waited = true;
          await other.query('ROLLBACK');
        }
        await sleep(10);
      }
      expect(waited).toBe(false);
      expect((await reaping).map((x) => x.workItem)).toEqual([TMUX, ENDED]);
      expect(await statusOf('d-2')).toBe('running');
    } finally {
      if (!waited) await other.query('ROLLBACK');
      await other.end();
    }
    expect((await new PgAbandon(b.db).reapAndSettle(0)).map((x) => x.workItem)).toEqual([IDLE]);
    expect(await statusOf('d-2')).toBe('queued');
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

/** Sessions of this database waiting on a lock (a row's). */
async function waiters(): Promise<number> {
  const row = await b.db.row<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
  );
  return row?.n ?? 0;
}

async function waitForWaiters(n: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((await waiters()) >= n) return;
    await sleep(10);
  }
  throw new Error(`no ${n} sessions waiting on a lock`);
}
