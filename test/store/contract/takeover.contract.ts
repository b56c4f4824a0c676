/**
 * The SessionStore contract, what the console asks of it: a take over (one person at a time, only
 * on an active session, cleared whatever the status, kept across a restart, one winner of two at
 * once) and a turn's events read after a cursor.
 */
import { expect, it } from 'vitest';
import type { SessionTakeover } from '../../../src/core/ports/sessions.js';
import type { StoreFactory } from './factory.js';
import { useStore } from './factory.js';
import { attempt, openSession, outcome, turnInput } from './fixtures.js';

const alice: SessionTakeover = { by: 'alice@host', since: '2026-03-01T10:00:00.000Z', principal: 'a1b2c3' };
const bob: SessionTakeover = { by: 'bob@host', since: '2026-03-01T10:05:00.000Z', principal: null };

export function takeoverCases(factory: StoreFactory): void {
  const { store, restart } = useStore(factory);

  it('a new session is not taken over; a take over is kept, read back everywhere, and cleared', async () => {
    const session = await openSession(store());
    expect(session.takeover).toBeNull();
    const taken = await store().sessions.setTakeover(session.id, alice);
    expect(taken.takeover).toEqual(alice);
    expect((await store().sessions.get(session.id))?.takeover).toEqual(alice);
    expect((await store().sessions.findActive(session.workItem))?.takeover).toEqual(alice);
    expect((await store().sessions.list({ workItem: session.workItem }))[0]?.takeover).toEqual(alice);
    const back = await store().sessions.setTakeover(session.id, null);
    expect(back.takeover).toBeNull();
    expect((await store().sessions.get(session.id))?.takeover).toBeNull();
  });

  it('the same person again is no conflict; another is refused (usage, naming who) until hand back', async () => {
    const session = await openSession(store());
    await store().sessions.setTakeover(session.id, alice);
    expect((await store().sessions.setTakeover(session.id, { ...alice })).takeover).toEqual(alice);
    await expect(attempt(() => store().sessions.setTakeover(session.id, bob))).rejects.toMatchObject({
      code: 'usage',
      message: expect.stringContaining('alice@host'),
    });
    // From the CLI (no login), the same name is the same person; another name is not.
    await store().sessions.setTakeover(session.id, null);
    await store().sessions.setTakeover(session.id, bob);
    expect(await outcome(() => store().sessions.setTakeover(session.id, { ...bob, since: 'later' }))).toBe(
      'ok',
    );
    expect(await outcome(() => store().sessions.setTakeover(session.id, { ...bob, by: 'carol' }))).toBe(
      'usage',
    );
    expect((await store().sessions.get(session.id))?.takeover?.by).toBe('bob@host');
  });

  it('refuses to take over a session that is not active (usage) or unknown (session-missing); hand back always works', async () => {
    const session = await openSession(store());
    await store().sessions.setTakeover(session.id, alice);
    await store().sessions.close(session.id, 'done');
    expect(await outcome(() => store().sessions.setTakeover(session.id, bob))).toBe('usage');
    expect((await store().sessions.setTakeover(session.id, null)).takeover).toBeNull();
    const lost = await openSession(store());
    await store().sessions.markGone(lost.id, 'lost', 'gone');
    expect(await outcome(() => store().sessions.setTakeover(lost.id, alice))).toBe('usage');
    expect(await outcome(() => store().sessions.setTakeover('no-such-session', alice))).toBe(
      'session-missing',
    );
    expect(await outcome(() => store().sessions.setTakeover('no-such-session', null))).toBe(
      'session-missing',
    );
  });

  it('two handles taking one session over at once: one wins, the other is told who', async () => {
    const session = await openSession(store());
    const other = await store().second();
    const results = await Promise.allSettled([
      attempt(() => store().sessions.setTakeover(session.id, alice)),
      attempt(() => other.sessions.setTakeover(session.id, bob)),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const held = (await store().sessions.get(session.id))?.takeover;
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ code: 'usage' });
    expect(String(refused.reason.message)).toContain(held?.by);
  });

  it('ends a take over once: two handles ending it at once, one is told it did; another take over is left alone', async () => {
    const session = await openSession(store());
    await store().sessions.setTakeover(session.id, alice);
    const other = await store().second();
    const ended = await Promise.all([
      store().sessions.endTakeover(session.id, alice),
      other.sessions.endTakeover(session.id, alice),
    ]);
    expect(ended.filter(Boolean)).toHaveLength(1);
    expect((await store().sessions.get(session.id))?.takeover).toBeNull();
    expect(await store().sessions.endTakeover(session.id, alice)).toBe(false);
    // Bob's take over is not alice's, whoever asks to end alice's.
    await store().sessions.setTakeover(session.id, bob);
    expect(await store().sessions.endTakeover(session.id, alice)).toBe(false);
    expect((await store().sessions.get(session.id))?.takeover).toEqual(bob);
  });

  it('a take over survives a restart', async () => {
    const session = await openSession(store());
    await store().sessions.setTakeover(session.id, alice);
    const after = await restart();
    expect((await after.sessions.get(session.id))?.takeover).toEqual(alice);
  });

  it("reads a turn's events after a cursor, in order, at most the limit", async () => {
    const session = await openSession(store());
    const turn = await store().sessions.beginTurn(session.id, turnInput());
    for (let i = 1; i <= 7; i++) await store().sessions.appendEvent(turn.id, { type: 'text', text: `t${i}` });
    const seqs = async (after?: { seq: number; limit: number }) =>
      (await store().sessions.events(turn.id, after)).map((e) => e.seq);
    expect(await seqs()).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(await seqs({ seq: 0, limit: 3 })).toEqual([1, 2, 3]);
    expect(await seqs({ seq: 3, limit: 100 })).toEqual([4, 5, 6, 7]);
    expect(await seqs({ seq: 7, limit: 100 })).toEqual([]);
    // Where a live view starts: the last ones, in order.
    expect((await store().sessions.events(turn.id, { last: 3 })).map((e) => e.seq)).toEqual([5, 6, 7]);
    expect((await store().sessions.events(turn.id, { last: 100 })).map((e) => e.seq)).toEqual([
      1, 2, 3, 4, 5, 6, 7,
    ]);
    const [fifth] = await store().sessions.events(turn.id, { seq: 4, limit: 1 });
    expect(fifth).toMatchObject({ turnId: turn.id, seq: 5, event: { type: 'text', text: 't5' } });
  });
}
