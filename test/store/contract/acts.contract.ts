/**
 * The ActStore contract: a turn's acts kept once per source and position, wire acts numbered after
 * the turn's earlier ones whoever records them at once, text scrubbed before it is kept, listed
 * newest first with their turn's number, and across a restart.
 */
import { describe, expect, it } from 'vitest';
import type { ActTurn, NewAct } from '../../../src/core/ports/acts.js';
import { type StoreFactory, useStore } from './factory.js';
import { CANARY, finishedTurn, openSession, scrubCanary } from './fixtures.js';

const act = (seq: number, extra: Partial<NewAct> = {}): NewAct => ({
  seq,
  toolUseId: `t${seq}`,
  tool: 'Bash',
  kind: 'git-push',
  command: `git push #${seq}`,
  detail: { n: seq },
  outcome: 'succeeded',
  verdict: 'allow',
  rule: null,
  breach: false,
  ...extra,
});
const wireAct = (): Omit<NewAct, 'seq'> => {
  const { seq: _, ...rest } = act(0);
  return rest;
};

export function actsContract(factory: StoreFactory): void {
  describe(`ActStore contract (${factory.name})`, () => {
    const { store, restart } = useStore(factory, { scrub: scrubCanary });
    /** The second turn of a session (its acts carry turn number 2). */
    const aTurn = async (at = '2026-03-01T10:00:00.000Z'): Promise<ActTurn> => {
      const session = await openSession(store());
      await finishedTurn(store(), session);
      const second = await finishedTurn(store(), session);
      return {
        id: second.id,
        seq: second.seq,
        sessionId: session.id,
        workItem: session.workItem,
        engine: 'claude',
        runner: 'process',
        at,
      };
    };

    it("keeps a turn's acts once per source and position, with the turn's number", async () => {
      const turn = await aTurn();
      await store().acts.save(turn, [act(1), act(2)], 'command');
      await store().acts.save(turn, [act(1, { command: 'changed' }), act(2), act(3)], 'command');
      await store().acts.save(turn, [act(1)], 'wire');
      await store().acts.save(turn, [], 'wire');
      const acts = await store().acts.list({ turnId: turn.id });
      expect(acts.map((a) => [a.source, a.seq]).sort()).toEqual([
        ['command', 1],
        ['command', 2],
        ['command', 3],
        ['wire', 1],
      ]);
      expect(acts.find((a) => a.source === 'command' && a.seq === 1)?.command).toBe('git push #1');
      expect(acts.every((a) => a.turnSeq === 2 && a.turnId === turn.id && a.workItem === turn.workItem)).toBe(
        true,
      );
      expect(acts[0]).toMatchObject({ sessionId: turn.sessionId, engine: 'claude', runner: 'process' });
    });

    it("numbers wire acts after the turn's earlier ones, also when two handles record them at once", async () => {
      const turn = await aTurn();
      await store().acts.save(turn, [act(1)], 'wire');
      const other = await store().second();
      await Promise.all([
        ...[1, 2, 3].map(() => store().acts.saveWire(turn, wireAct())),
        ...[1, 2, 3].map(() => other.acts.saveWire(turn, wireAct())),
      ]);
      const seqs = (await other.acts.list({ turnId: turn.id })).map((a) => a.seq).sort((a, b) => a - b);
      expect(seqs).toEqual([1, 2, 3, 4, 5, 6, 7]);
    });

    it('lists newest first, filtered, at most the limit', async () => {
      const turn = await aTurn();
      const later = { ...turn, at: '2026-03-02T10:00:00.000Z' };
      await store().acts.save(
        turn,
        [act(1), act(2, { kind: 'pr-merge', breach: true, verdict: 'deny' })],
        'command',
      );
      await store().acts.save(later, [act(1)], 'wire');
      const all = await store().acts.list();
      expect(all.map((a) => [a.source, a.seq])).toEqual([
        ['wire', 1],
        ['command', 2],
        ['command', 1],
      ]);
      expect((await store().acts.list({ limit: 1 })).map((a) => a.source)).toEqual(['wire']);
      expect((await store().acts.list({ breachesOnly: true })).map((a) => a.kind)).toEqual(['pr-merge']);
      expect(await store().acts.list({ kind: 'pr-merge', sessionId: turn.sessionId })).toHaveLength(1);
      expect(await store().acts.list({ workItem: turn.workItem })).toHaveLength(3);
      expect(await store().acts.list({ since: new Date('2026-03-02T00:00:00.000Z') })).toHaveLength(1);
    });

    it('answers filters that match nothing with nothing', async () => {
      expect(await store().acts.list()).toEqual([]);
      expect(await store().acts.list({ turnId: 987_654 })).toEqual([]);
      expect(await store().acts.list({ workItem: 'github:octo/elsewhere#1' })).toEqual([]);
      expect(await store().acts.list({ sessionId: 'no-such-session' })).toEqual([]);
    });

    it('scrubs the command and the detail before they are kept', async () => {
      const turn = await aTurn();
      await store().acts.save(
        turn,
        [act(1, { command: `git push ${CANARY}`, detail: { token: CANARY } })],
        'command',
      );
      await store().acts.saveWire(turn, { ...wireAct(), command: `curl -H ${CANARY}` });
      const after = await restart();
      const stored = await after.acts.list({ turnId: turn.id });
      expect(stored.find((a) => a.source === 'command')).toMatchObject({
        command: 'git push [redacted]',
        detail: { token: '[redacted]' },
      });
      expect(stored.find((a) => a.source === 'wire')?.command).toBe('curl -H [redacted]');
      const contents = await after.contents?.();
      if (contents !== undefined) expect(contents).not.toContain(CANARY);
    });

    it('keeps acts across a restart, and stays idempotent after it', async () => {
      const turn = await aTurn();
      await store().acts.save(turn, [act(1, { breach: true, verdict: 'deny' }), act(2)], 'command');
      await store().acts.saveWire(turn, wireAct());
      const before = await store().acts.list();
      const after = await restart();
      expect(await after.acts.list()).toEqual(before);
      expect(await after.acts.list({ breachesOnly: true })).toMatchObject([{ turnSeq: 2, breach: true }]);
      await after.acts.save(turn, [act(1), act(2)], 'command');
      await after.acts.saveWire(turn, wireAct());
      expect((await after.acts.list({ turnId: turn.id })).map((a) => [a.source, a.seq]).sort()).toEqual([
        ['command', 1],
        ['command', 2],
        ['wire', 1],
        ['wire', 2],
      ]);
    });
  });
}
