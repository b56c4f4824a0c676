/**
 * Turns whose owner died, on PostgreSQL, as on SQLite (test/store/sqlite/sessions.test.ts): which are
 * recovered as lost, which are left to adopt, adoption itself, a turn marked lost once with its
 * unmetered drive, and a turn's events forgotten and numbered again.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewSession, TurnEnd } from '../../../src/core/ports/sessions.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { PgSessionStore } from '../../../src/store/postgres/sessions.js';
import { freshDatabase } from '../../helpers/postgres.js';

let db: Pg;
let drop: () => Promise<void>;

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  db = await openPg(database.url, { max: 4 });
});

afterEach(async () => {
  await db.close();
  await drop();
});

const openStore = (options: { ownerPid?: number; now?: () => Date } = {}) =>
  new PgSessionStore(db, { scrub: (t) => t, ...options });

const newSession = (workItem: string, extra: Partial<NewSession> = {}): NewSession => ({
  workItem,
  slug: workItem.replace(/[^a-z0-9]+/g, '-'),
  engine: 'claude',
  runner: 'process',
  engineSessionId: null,
  cwd: '/work/widgets',
  credentialKind: null,
  credentialEnv: null,
  ...extra,
});

const turnInput = { promptDigest: 'sha256:abc', promptBytes: 12, meter: 'stream-json' as const };

const end = (): TurnEnd => ({
  status: 'succeeded',
  endReason: 'result',
  endedAt: '2026-01-01T00:00:00.000Z',
  exitCode: 0,
  exitSignal: null,
  model: null,
  usage: null,
  costUsd: null,
  error: null,
});

const ownerOf = async (id: number) =>
  (await db.row<{ owner_pid: number }>('SELECT owner_pid FROM turns WHERE id = $1', [id]))?.owner_pid;

describe('recoverLostTurns', () => {
  it('marks only running turns whose owner is dead as failed/lost', async () => {
    const alive = openStore({ ownerPid: 1001 });
    const dead = openStore({ ownerPid: 2002 });
    const s1 = await alive.create(newSession('github:o/r#1'));
    const s2 = await dead.create(newSession('github:o/r#2'));
    const s3 = await dead.create(newSession('github:o/r#3'));
    const runningAlive = await alive.beginTurn(s1.id, turnInput);
    const runningDead = await dead.beginTurn(s2.id, turnInput);
    await dead.finishTurn((await dead.beginTurn(s3.id, turnInput)).id, end());
    const asked: number[] = [];
    const isAlive = (pid: number) => {
      asked.push(pid);
      return pid === 1001;
    };
    const recovering = openStore({ now: () => new Date('2026-01-02T00:00:00.000Z') });
    expect(await recovering.recoverLostTurns(isAlive)).toBe(1);
    expect(asked.sort()).toEqual([1001, 2002]);
    expect((await recovering.turns(s1.id))[0]).toMatchObject({ id: runningAlive.id, status: 'running' });
    expect((await recovering.turns(s2.id))[0]).toMatchObject({
      id: runningDead.id,
      status: 'failed',
      endReason: 'lost',
      endedAt: '2026-01-02T00:00:00.000Z',
      usage: null,
    });
    expect((await recovering.turns(s3.id))[0]).toMatchObject({ status: 'succeeded', endReason: 'result' });
    expect(await recovering.recoverLostTurns(isAlive)).toBe(0);
    expect((await recovering.beginTurn(s2.id, turnInput)).seq).toBe(2);
  });

  it('anyTurnOrphaned: only a running turn whose owner is gone makes a reader recover', async () => {
    const daemon = openStore({ ownerPid: 1001 });
    const reader = openStore();
    const isAlive = (pid: number) => pid === 1001;
    expect(await reader.anyTurnOrphaned(isAlive)).toBe(false);
    const s1 = await daemon.create(newSession('github:o/r#1'));
    const s2 = await daemon.create(newSession('github:o/r#2'));
    const t1 = await daemon.beginTurn(s1.id, turnInput);
    await daemon.beginTurn(s2.id, turnInput);
    expect(await reader.anyTurnOrphaned(isAlive)).toBe(false);
    expect(await reader.anyTurnOrphaned(() => false)).toBe(true);
    await daemon.finishTurn(t1.id, end());
    expect(await reader.recoverLostTurns(() => false)).toBe(1);
    expect(await reader.anyTurnOrphaned(() => false)).toBe(false);
  });

  it('with skipRunners, leaves a tmux turn whose owner died running, and marks a process turn lost', async () => {
    const dead = openStore({ ownerPid: 2002 });
    const tmux = await dead.create(newSession('github:o/r#1', { runner: 'tmux' }));
    const proc = await dead.create(newSession('github:o/r#2'));
    await dead.beginTurn(tmux.id, turnInput);
    const procTurn = await dead.beginTurn(proc.id, turnInput);
    const store = openStore();
    const lost: number[] = [];
    expect(
      await store.recoverLostTurns(
        () => false,
        (t) => lost.push(t.id),
        { skipRunners: ['tmux'] },
      ),
    ).toBe(1);
    expect(lost).toEqual([procTurn.id]);
    expect((await store.turns(tmux.id))[0]?.status).toBe('running');
    expect(await store.recoverLostTurns(() => false)).toBe(1);
    expect((await store.turns(tmux.id))[0]).toMatchObject({ status: 'failed', endReason: 'lost' });
  });
});

describe('orphan turns and adoption', () => {
  it('orphanTurns: only running turns with a dead owner, of sessions on the given runners; it changes nothing', async () => {
    const dead = openStore({ ownerPid: 2002 });
    const alive = openStore({ ownerPid: 1001 });
    const mine = openStore();
    const a = await dead.create(newSession('github:o/r#1', { runner: 'tmux' }));
    const b = await alive.create(newSession('github:o/r#2', { runner: 'tmux' }));
    const c = await dead.create(newSession('github:o/r#3', { runner: 'tmux' }));
    const d = await dead.create(newSession('github:o/r#4'));
    const e = await mine.create(newSession('github:o/r#5', { runner: 'tmux' }));
    const orphan = await dead.beginTurn(a.id, turnInput);
    await alive.beginTurn(b.id, turnInput);
    await dead.finishTurn((await dead.beginTurn(c.id, turnInput)).id, end());
    await dead.beginTurn(d.id, turnInput);
    const ownOrphan = await mine.beginTurn(e.id, turnInput);
    const store = openStore();
    const isAlive = (pid: number) => pid === 1001;
    const found = await store.orphanTurns(isAlive, ['tmux']);
    expect(found.map((t) => t.id)).toEqual([orphan.id, ownOrphan.id]);
    expect(found[0]).toEqual(orphan);
    expect((await store.orphanTurns(isAlive, ['process'])).map((t) => t.sessionId)).toEqual([d.id]);
    expect(await store.orphanTurns(isAlive, [])).toEqual([]);
    expect((await store.turns(a.id))[0]?.status).toBe('running');
  });

  it('markTurnLost: failed / lost / error, only for a running turn, its drive recorded once', async () => {
    const store = openStore({ now: () => new Date('2026-01-03T00:00:00.000Z') });
    const s = await store.create(newSession('github:o/r#1'));
    const turn = await store.beginTurn(s.id, turnInput);
    await store.markTurnLost(turn.id, 'could not be adopted: tmux session gone');
    const lost = (await store.turns(s.id))[0];
    expect(lost).toMatchObject({
      status: 'failed',
      endReason: 'lost',
      endedAt: '2026-01-03T00:00:00.000Z',
      error: 'could not be adopted: tmux session gone',
      usage: null,
    });
    await store.markTurnLost(turn.id, 'again');
    expect(await db.rows('SELECT turn_id, engine, runner, reason FROM unmetered_drives')).toEqual([
      {
        turn_id: turn.id,
        engine: s.engine,
        runner: s.runner,
        reason: 'lost: could not be adopted: tmux session gone',
      },
    ]);
    const next = await store.beginTurn(s.id, turnInput);
    const finished = await store.finishTurn(next.id, end());
    await store.markTurnLost(next.id, 'late');
    expect((await store.turns(s.id))[1]).toEqual(finished);
    expect((await store.turns(s.id))[0]).toEqual(lost);
  });

  it('adoptTurn makes this process the owner of a running turn, and leaves a finished one alone', async () => {
    const dead = openStore({ ownerPid: 2002 });
    const s1 = await dead.create(newSession('github:o/r#1'));
    const s2 = await dead.create(newSession('github:o/r#2'));
    const running = await dead.beginTurn(s1.id, turnInput);
    const finished = await dead.beginTurn(s2.id, turnInput);
    await dead.finishTurn(finished.id, end());
    expect(await ownerOf(running.id)).toBe(2002);
    const store = openStore();
    await store.adoptTurn(running.id);
    await store.adoptTurn(finished.id);
    expect(await ownerOf(running.id)).toBe(process.pid);
    expect(await ownerOf(finished.id)).toBe(2002);
  });

  it('clearEvents removes one turn’s events and numbering restarts at 1', async () => {
    const store = openStore();
    const t1 = await store.beginTurn((await store.create(newSession('github:o/r#1'))).id, turnInput);
    const t2 = await store.beginTurn((await store.create(newSession('github:o/r#2'))).id, turnInput);
    for (const text of ['a', 'b', 'c']) await store.appendEvent(t1.id, { type: 'text', text });
    await store.appendEvent(t2.id, { type: 'text', text: 'other' });
    await store.clearEvents(t1.id);
    expect(await store.events(t1.id)).toEqual([]);
    await store.appendEvent(t1.id, { type: 'text', text: 'replayed' });
    expect((await store.events(t1.id)).map((e) => [e.seq, (e.event as { text: string }).text])).toEqual([
      [1, 'replayed'],
    ]);
    await store.appendEvent(t2.id, { type: 'text', text: 'other 2' });
    expect((await store.events(t2.id)).map((e) => e.seq)).toEqual([1, 2]);
    expect(await store.events(t2.id, { last: 1 })).toMatchObject([{ seq: 2 }]);
    expect(await store.events(t2.id, { seq: 0, limit: 1 })).toMatchObject([{ seq: 1 }]);
  });
});

describe('turnAt and engineSessions', () => {
  it('turnAt: the last turn started before the instant, else the latest', async () => {
    let clock = new Date('2026-01-01T10:00:00.000Z');
    const store = openStore({ now: () => clock });
    const s = await store.create(newSession('github:o/r#1', { engineSessionId: 'e-1' }));
    const first = await store.finishTurn((await store.beginTurn(s.id, turnInput)).id, end());
    clock = new Date('2026-01-01T11:00:00.000Z');
    const second = await store.beginTurn(s.id, { ...turnInput, meter: 'transcript' });
    expect((await store.turnAt(s.id, '2026-01-01T10:30:00.000Z'))?.id).toBe(first.id);
    expect((await store.turnAt(s.id, '2026-01-01T12:00:00.000Z'))?.id).toBe(second.id);
    expect((await store.turnAt(s.id, '2026-01-01T09:00:00.000Z'))?.id).toBe(second.id);
    expect(await store.turnAt('no-such-session', '2026-01-01T09:00:00.000Z')).toBeUndefined();
    expect((await store.currentTurn(s.id))?.id).toBe(second.id);
    expect(await store.engineSessions()).toMatchObject([
      { id: s.id, engineSessionId: 'e-1', lastMeter: 'transcript' },
    ]);
  });
});
