/**
 * The SessionStore contract: sessions (one active per work item, its slug its own), turns (numbered
 * in their session, one running at a time) and their events (in the order appended), whoever writes
 * at once, across a restart, and what an engine said scrubbed before it is kept.
 */
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../src/core/events.js';
import type { SessionStore } from '../../../src/core/ports/sessions.js';
import type { StoreFactory } from './factory.js';
import { useStore } from './factory.js';
import {
  attempt,
  CANARY,
  finishedTurn,
  openSession,
  outcome,
  scrubCanary,
  sessionInput,
  turnEnd,
  turnInput,
  usage,
  workItem,
} from './fixtures.js';
import { takeoverCases } from './takeover.contract.js';

const ALL_TIME = { since: new Date('2000-01-01'), until: new Date('2100-01-01'), by: 'day' as const };

export function sessionsContract(factory: StoreFactory): void {
  describe(`SessionStore contract (${factory.name})`, () => {
    describe('sessions, turns and events', () => sessionsAndTurns(factory));
    describe('two handles, restart, scrubbing', () => twoHandlesAndRestart(factory));
    describe('take over, events after a cursor', () => takeoverCases(factory));
  });
}

function sessionsAndTurns(factory: StoreFactory): void {
  const { store } = useStore(factory);

  it('creates an active session and reads it back by id, by its work item and in lists', async () => {
    const item = workItem();
    const created = await store().sessions.create(sessionInput(item, { engineSessionId: 'e-1' }));
    expect(created).toMatchObject({
      workItem: item,
      engine: 'claude',
      runner: 'process',
      engineSessionId: 'e-1',
      engineSessionStarted: false,
      cwd: '/work/widgets',
      status: 'active',
      hold: null,
      budgetRaise: {},
      waiting: null,
      closedAt: null,
      closeReason: null,
    });
    expect(await store().sessions.get(created.id)).toEqual(created);
    expect((await store().sessions.findActive(item))?.id).toBe(created.id);
    expect((await store().sessions.list({ workItem: item })).map((s) => s.id)).toEqual([created.id]);
  });

  it('lists newest first, filtered by work item and status, at most the limit', async () => {
    const a = await openSession(store());
    const b = await openSession(store());
    const c = await openSession(store());
    await store().sessions.close(b.id, 'done');
    const ids = async (filter?: Parameters<SessionStore['list']>[0]) =>
      (await store().sessions.list(filter)).map((s) => s.id);
    expect(await ids()).toEqual([c.id, b.id, a.id]);
    expect(await ids({ status: 'closed' })).toEqual([b.id]);
    expect(await ids({ status: 'active' })).toEqual([c.id, a.id]);
    expect(await ids({ limit: 2 })).toEqual([c.id, b.id]);
    expect(await ids({ workItem: a.workItem })).toEqual([a.id]);
  });

  it('refuses a second active session of one work item (session-busy); after a close, one may start', async () => {
    const first = await openSession(store());
    expect(await outcome(() => store().sessions.create(sessionInput(first.workItem)))).toBe('session-busy');
    await store().sessions.close(first.id, 'done');
    const second = await store().sessions.create(sessionInput(first.workItem));
    expect(second.id).not.toBe(first.id);
    expect((await store().sessions.findActive(first.workItem))?.id).toBe(second.id);
  });

  it("refuses a slug another work item holds (slug-collision); a work item's next slug is its own", async () => {
    const first = await openSession(store());
    const other = sessionInput(workItem(), { slug: first.slug });
    expect(await outcome(() => store().sessions.create(other))).toBe('slug-collision');
    expect(await store().sessions.findActive(other.workItem)).toBeUndefined();
    expect(await store().sessions.slugFor(first.workItem)).toBe(first.slug);
  });

  it('keeps the first close (a second keeps its reason); an unknown session → session-missing', async () => {
    const s = await openSession(store());
    const closed = await store().sessions.close(s.id, 'first');
    expect(closed).toMatchObject({ status: 'closed', closeReason: 'first' });
    expect(closed.closedAt).not.toBeNull();
    expect(await store().sessions.close(s.id, 'second')).toMatchObject({ closeReason: 'first' });
    expect(await store().sessions.findActive(s.workItem)).toBeUndefined();
    expect(await outcome(() => store().sessions.close('no-such-session', 'x'))).toBe('session-missing');
    expect(await outcome(() => store().sessions.markGone('no-such-session', 'lost', 'x'))).toBe(
      'session-missing',
    );
  });

  it('marks an active session lost or ended with why; a closed one stays closed', async () => {
    const s = await openSession(store());
    expect(await store().sessions.markGone(s.id, 'lost', 'tmux session gone')).toMatchObject({
      status: 'lost',
      closeReason: 'tmux session gone',
    });
    const t = await openSession(store());
    await store().sessions.close(t.id, 'done');
    expect(await store().sessions.markGone(t.id, 'ended', 'SessionEnd')).toMatchObject({ status: 'closed' });
  });

  it("keeps a session's hold until released, adds raises to earlier ones, and records what it learns", async () => {
    const s = await openSession(store());
    const hold = { kind: 'breach' as const, reason: 'pushed to main', acts: [1], turnId: 1, since: 'now' };
    await store().sessions.setHold(s.id, hold);
    expect((await store().sessions.get(s.id))?.hold).toEqual(hold);
    await store().sessions.setHold(s.id, null);
    expect((await store().sessions.get(s.id))?.hold).toBeNull();
    await store().sessions.raiseBudget(s.id, { turns: 2 });
    expect(await store().sessions.raiseBudget(s.id, { turns: 1, usd: 5 })).toMatchObject({
      budgetRaise: { turns: 3, usd: 5 },
    });
    await store().sessions.setUsageBaseline(s.id, usage(1, 2));
    await store().sessions.setCredential(s.id, 'api-key', 'ANTHROPIC_API_KEY', 'key:0123456789ab');
    expect(await store().sessions.get(s.id)).toMatchObject({
      usageBaseline: usage(1, 2),
      credentialKind: 'api-key',
      credentialEnv: 'ANTHROPIC_API_KEY',
      payerId: 'key:0123456789ab',
    });
    expect(await outcome(() => store().sessions.raiseBudget('no-such-session', { turns: 1 }))).toBe(
      'session-missing',
    );
  });

  it('numbers turns 1, 2, 3 in each session and lists them in that order', async () => {
    const s = await openSession(store());
    for (let i = 0; i < 3; i++) await finishedTurn(store(), s);
    const other = await openSession(store());
    const first = await finishedTurn(store(), other);
    const turns = await store().sessions.turns(s.id);
    expect(turns.map((t) => [t.seq, t.status, t.sessionId])).toEqual([
      [1, 'succeeded', s.id],
      [2, 'succeeded', s.id],
      [3, 'succeeded', s.id],
    ]);
    expect(first.seq).toBe(1);
    // Many sessions at once (what `sessions list` reads): each its own turns in order, none for one
    // unknown or without turns, the same as one session at a time.
    const none = await openSession(store());
    const of = await store().sessions.turnsOfSessions([other.id, s.id, none.id, 'no-such-session']);
    expect([...of.keys()]).toEqual([other.id, s.id, none.id, 'no-such-session']);
    expect(of.get(s.id)).toEqual(turns);
    expect(of.get(other.id)).toEqual(await store().sessions.turns(other.id));
    expect(of.get(none.id)).toEqual([]);
    expect(of.get('no-such-session')).toEqual([]);
    expect((await store().sessions.turnsOfSessions([])).size).toBe(0);
  });

  it('refuses a second running turn of one session (session-busy); after the end, the next begins', async () => {
    const s = await openSession(store());
    const turn = await store().sessions.beginTurn(s.id, turnInput());
    expect(turn).toMatchObject({ status: 'running', seq: 1, endedAt: null, usage: null });
    expect(await outcome(() => store().sessions.beginTurn(s.id, turnInput()))).toBe('session-busy');
    await store().sessions.finishTurn(turn.id, turnEnd());
    expect((await store().sessions.beginTurn(s.id, turnInput())).seq).toBe(2);
  });

  it('refuses a turn of a closed session (session-closed) and of an unknown one (session-missing)', async () => {
    const s = await openSession(store());
    await store().sessions.close(s.id, 'done');
    expect(await outcome(() => store().sessions.beginTurn(s.id, turnInput()))).toBe('session-closed');
    expect(await outcome(() => store().sessions.beginTurn('no-such-session', turnInput()))).toBe(
      'session-missing',
    );
  });

  it('records the end of a turn: usage and cost as given, null usage kept null', async () => {
    const s = await openSession(store());
    const one = await store().sessions.beginTurn(s.id, turnInput());
    const measured = await store().sessions.finishTurn(
      one.id,
      turnEnd({ usage: usage(3, 12), costUsd: 0.5 }),
    );
    expect(measured).toMatchObject({
      status: 'succeeded',
      endReason: 'result',
      model: 'm',
      usage: usage(3, 12),
      costUsd: 0.5,
      costBasis: 'engine-reported',
    });
    const two = await store().sessions.beginTurn(s.id, turnInput());
    const unmeasured = await store().sessions.finishTurn(
      two.id,
      turnEnd({ status: 'failed', endReason: 'error', usage: null, error: 'boom', warnings: ['w'] }),
    );
    expect(unmeasured).toMatchObject({ status: 'failed', usage: null, costUsd: null, costBasis: null });
    expect(unmeasured).toMatchObject({ error: 'boom', warnings: ['w'] });
  });

  it("keeps a turn's events in the order appended, numbered upward", async () => {
    const s = await openSession(store());
    const turn = await store().sessions.beginTurn(s.id, turnInput());
    const sent: TurnEvent[] = [
      { type: 'session', engineSessionId: 'e-1' },
      { type: 'text', text: 'one' },
      { type: 'tool-use', id: 't', name: 'Bash', input: { command: 'ls' } },
      { type: 'tool-result', id: 't', ok: true, summary: 'a b' },
      { type: 'text', text: 'two' },
    ];
    for (const e of sent) await store().sessions.appendEvent(turn.id, e);
    const stored = await store().sessions.events(turn.id);
    expect(stored.map((e) => e.event)).toEqual(sent);
    expect(stored.every((e) => e.turnId === turn.id)).toBe(true);
    const seqs = stored.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    await store().sessions.clearEvents(turn.id);
    expect(await store().sessions.events(turn.id)).toEqual([]);
  });

  it("finds a delivery's turns in order, the current turn, and the sessions an engine confirmed", async () => {
    const s = await openSession(store());
    const first = await store().sessions.beginTurn(s.id, turnInput('d-1'));
    await store().sessions.finishTurn(first.id, turnEnd({ status: 'failed', endReason: 'error' }));
    expect((await store().sessions.currentTurn(s.id))?.id).toBe(first.id);
    const second = await store().sessions.beginTurn(s.id, turnInput('d-1'));
    expect((await store().sessions.currentTurn(s.id))?.id).toBe(second.id);
    expect((await store().sessions.turnsForDelivery('d-1')).map((t) => t.id)).toEqual([first.id, second.id]);
    expect((await store().sessions.turnAt(s.id, '2100-01-01T00:00:00.000Z'))?.id).toBe(second.id);

    await store().sessions.markEngineSessionStarted(s.id, 'e-1');
    await openSession(store());
    const confirmed = await store().sessions.engineSessions();
    expect(confirmed.map((c) => [c.id, c.engineSessionId, c.lastMeter])).toEqual([
      [s.id, 'e-1', 'stream-json'],
    ]);
    expect(await store().sessions.get(s.id)).toMatchObject({ engineSessionStarted: true });
  });

  it('answers unknown ids with nothing, not a failure', async () => {
    const sessions = store().sessions;
    expect(await sessions.get('no-such-session')).toBeUndefined();
    expect(await sessions.findActive('github:octo/nothing#1')).toBeUndefined();
    expect(await sessions.list({ workItem: 'github:octo/nothing#1' })).toEqual([]);
    expect(await sessions.turns('no-such-session')).toEqual([]);
    expect(await sessions.currentTurn('no-such-session')).toBeUndefined();
    expect(await sessions.turnAt('no-such-session', new Date().toISOString())).toBeUndefined();
    expect(await sessions.turnsForDelivery('no-such-delivery')).toEqual([]);
    expect(await sessions.events(987_654)).toEqual([]);
  });

  it('marks a running turn lost with the error (once); a finished turn stays as it ended', async () => {
    const s = await openSession(store());
    const done = await finishedTurn(store(), s);
    const running = await store().sessions.beginTurn(s.id, turnInput());
    await store().sessions.markTurnLost(running.id, 'its process died');
    await store().sessions.markTurnLost(done.id, 'its process died');
    const [first, second] = await store().sessions.turns(s.id);
    expect(first).toMatchObject({ status: 'succeeded', endReason: 'result', error: null });
    expect(second).toMatchObject({ status: 'failed', endReason: 'lost', error: 'its process died' });
    expect(second?.endedAt).not.toBeNull();
  });
}

function twoHandlesAndRestart(factory: StoreFactory): void {
  const { store, restart } = useStore(factory, { scrub: scrubCanary });

  it('two handles opening a session for one work item at once: exactly one is created', async () => {
    const other = await store().second();
    const item = workItem();
    const results = await Promise.allSettled([
      attempt(() => store().sessions.create(sessionInput(item))),
      attempt(() => other.sessions.create(sessionInput(item))),
    ]);
    const created = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(created).toHaveLength(1);
    expect(
      results.map((r) => (r.status === 'rejected' ? (r.reason as { code?: string }).code : 'ok')).sort(),
    ).toEqual(['ok', 'session-busy']);
    expect((await other.sessions.findActive(item))?.id).toBe(created[0]?.id);
    expect((await store().sessions.list({ workItem: item })).length).toBe(1);
  });

  it('two handles beginning a turn of one session at once: exactly one turn runs', async () => {
    const other = await store().second();
    const s = await openSession(store());
    const results = await Promise.allSettled([
      attempt(() => store().sessions.beginTurn(s.id, turnInput())),
      attempt(() => other.sessions.beginTurn(s.id, turnInput())),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const refused = results.find((r) => r.status === 'rejected');
    expect((refused as PromiseRejectedResult).reason).toMatchObject({ code: 'session-busy' });
    const turns = await other.sessions.turns(s.id);
    expect(turns.map((t) => [t.seq, t.status])).toEqual([[1, 'running']]);
    // The one that runs is seen ending by the other handle, which then begins the next.
    await store().sessions.finishTurn(turns[0]?.id ?? -1, turnEnd());
    expect((await other.sessions.beginTurn(s.id, turnInput())).seq).toBe(2);
  });

  it('sessions, turns, events, holds and raises survive a restart; a running turn is still running', async () => {
    const s = await openSession(store());
    const done = await finishedTurn(store(), s);
    const running = await store().sessions.beginTurn(s.id, turnInput('d-7'));
    await store().sessions.appendEvent(running.id, { type: 'text', text: 'before' });
    const hold = {
      kind: 'over-budget' as const,
      reason: '2 of 2 turns (session, last 24 h)',
      dimension: 'turns' as const,
      scope: 'session' as const,
      used: 2,
      limit: 2,
      since: '2026-03-01T10:00:00.000Z',
    };
    await store().sessions.setHold(s.id, hold);
    await store().sessions.raiseBudget(s.id, { turns: 2 });
    const closed = await openSession(store());
    await store().sessions.close(closed.id, 'merged');
    const before = await store().sessions.get(s.id);

    const after = await restart();
    expect(await after.sessions.get(s.id)).toEqual(before);
    expect(await after.sessions.get(s.id)).toMatchObject({
      hold,
      budgetRaise: { turns: 2 },
      status: 'active',
    });
    expect(await after.sessions.get(closed.id)).toMatchObject({ status: 'closed', closeReason: 'merged' });
    const turns = await after.sessions.turns(s.id);
    expect(turns.map((t) => [t.id, t.seq, t.status])).toEqual([
      [done.id, 1, 'succeeded'],
      [running.id, 2, 'running'],
    ]);
    expect((await after.sessions.currentTurn(s.id))?.id).toBe(running.id);
    expect(await outcome(() => after.sessions.beginTurn(s.id, turnInput()))).toBe('session-busy');
    // Events appended after the restart come after the ones before it.
    await after.sessions.appendEvent(running.id, { type: 'text', text: 'after' });
    const events = await after.sessions.events(running.id);
    expect(events.map((e) => e.event)).toEqual([
      { type: 'text', text: 'before' },
      { type: 'text', text: 'after' },
    ]);
    expect(events[1]?.seq).toBeGreaterThan(events[0]?.seq ?? Number.POSITIVE_INFINITY);
  });

  it('after a restart, a turn whose process is gone is recovered as lost once, with its unmetered drive', async () => {
    const s = await openSession(store());
    const running = await store().sessions.beginTurn(s.id, turnInput());
    const after = await restart();
    const seen: number[] = [];
    expect(
      await after.sessions.recoverLostTurns(
        () => false,
        (t) => seen.push(t.id),
      ),
    ).toBe(1);
    expect(seen).toEqual([running.id]);
    expect(await after.sessions.recoverLostTurns(() => false)).toBe(0);
    expect((await after.sessions.turns(s.id))[0]).toMatchObject({ status: 'failed', endReason: 'lost' });
    // Nothing measured what it used: the ledger says so (invariant 2).
    const report = await after.ledger.report(ALL_TIME);
    expect(report.notIncluded.unmeteredCount).toBe(1);
    expect((await after.sessions.beginTurn(s.id, turnInput())).seq).toBe(2);
  });

  it('what an engine said passes through the scrubber before it is kept', async () => {
    const s = await openSession(store());
    const turn = await store().sessions.beginTurn(s.id, turnInput());
    await store().sessions.appendEvent(turn.id, { type: 'text', text: `my key is ${CANARY}` });
    await store().sessions.appendEvent(turn.id, {
      type: 'tool-use',
      id: 't',
      name: 'Bash',
      input: { command: `echo ${CANARY}` },
    });
    await store().sessions.appendEvent(turn.id, { type: 'error', message: `401 for ${CANARY}` });
    await store().sessions.setWaiting(s.id, { since: 'now', message: `allow ${CANARY}?` });
    const ended = await store().sessions.finishTurn(
      turn.id,
      turnEnd({
        status: 'failed',
        endReason: 'error',
        error: `bad key ${CANARY}`,
        warnings: [`refused ${CANARY}`],
      }),
    );
    expect(ended.error).toBe('bad key [redacted]');
    expect(ended.warnings).toEqual(['refused [redacted]']);
    const events = (await store().sessions.events(turn.id)).map((e) => e.event);
    expect(events[0]).toEqual({ type: 'text', text: 'my key is [redacted]' });
    expect(events[1]).toMatchObject({ input: { command: 'echo [redacted]' } });
    const after = await restart();
    const kept = JSON.stringify([
      await after.sessions.get(s.id),
      await after.sessions.turns(s.id),
      await after.sessions.events(turn.id),
    ]);
    expect(kept).toContain('[redacted]');
    expect(kept).not.toContain(CANARY);
    const contents = await after.contents?.();
    if (contents !== undefined) expect(contents).not.toContain(CANARY);
  });
}
