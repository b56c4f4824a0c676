/**
 * The ActStore contract: a turn's acts kept once per source and position, wire acts numbered after
 * the turn's earlier ones whoever records them at once, text scrubbed, listed newest first with
 * their turn's number, across a restart.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ActTurn, NewAct } from '../../../src/core/ports/acts.js';
import { newSession, newTurn, type OpenWorld, type PortWorld } from './world.js';

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

export function actsContract(open: OpenWorld): void {
  describe('ActStore contract', () => {
    let world: PortWorld;
    let turn: ActTurn;
    const extra: PortWorld[] = [];
    beforeEach(async () => {
      world = await open({ scrub: (t) => t.replaceAll('SECRET', '[secret]') });
      const session = await newSession(world);
      await newTurn(world, session);
      const second = await newTurn(world, session);
      turn = {
        id: second.id,
        seq: second.seq,
        sessionId: session.id,
        workItem: session.workItem,
        engine: 'claude',
        runner: 'process',
        at: '2026-03-01T10:00:00.000Z',
      };
    });
    afterEach(async () => {
      for (const w of extra.splice(0)) await w.close();
      await world.close();
    });

    it("keeps a turn's acts once per source and position, with the turn's number", async () => {
      await world.acts.save(turn, [act(1), act(2)], 'command');
      await world.acts.save(turn, [act(1), act(2), act(3)], 'command');
      await world.acts.save(turn, [act(1)], 'wire');
      const acts = await world.acts.list({ turnId: turn.id });
      expect(acts.map((a) => [a.source, a.seq]).sort()).toEqual([
        ['command', 1],
        ['command', 2],
        ['command', 3],
        ['wire', 1],
      ]);
      expect(acts.every((a) => a.turnSeq === 2 && a.turnId === turn.id && a.workItem === turn.workItem)).toBe(
        true,
      );
    });

    it("numbers wire acts after the turn's earlier ones, also when they are recorded at once", async () => {
      await world.acts.save(turn, [act(1)], 'wire');
      const other = await world.another();
      extra.push(other);
      const { seq: _, ...wire } = act(0);
      await Promise.all([
        ...[1, 2, 3].map(() => world.acts.saveWire(turn, wire)),
        ...[1, 2, 3].map(() => other.acts.saveWire(turn, wire)),
      ]);
      const seqs = (await world.acts.list({ turnId: turn.id })).map((a) => a.seq).sort((a, b) => a - b);
      expect(seqs).toEqual([1, 2, 3, 4, 5, 6, 7]);
    });

    it('scrubs the command and the detail before they are stored', async () => {
      await world.acts.save(
        turn,
        [act(1, { command: 'git push SECRET', detail: { token: 'SECRET' } })],
        'command',
      );
      const [stored] = await world.acts.list({ turnId: turn.id });
      expect(stored?.command).toBe('git push [secret]');
      expect(stored?.detail).toEqual({ token: '[secret]' });
    });

    it('lists newest first, filtered, at most the limit', async () => {
      const later = { ...turn, at: '2026-03-02T10:00:00.000Z' };
      await world.acts.save(
        turn,
        [act(1), act(2, { kind: 'pr-merge', breach: true, verdict: 'deny' })],
        'command',
      );
      await world.acts.save(later, [act(1)], 'wire');
      const all = await world.acts.list();
      expect(all.map((a) => [a.source, a.seq])).toEqual([
        ['wire', 1],
        ['command', 2],
        ['command', 1],
      ]);
      expect(await world.acts.list({ limit: 1 })).toHaveLength(1);
      expect((await world.acts.list({ breachesOnly: true })).map((a) => a.kind)).toEqual(['pr-merge']);
      expect(await world.acts.list({ kind: 'pr-merge', sessionId: turn.sessionId })).toHaveLength(1);
      expect(await world.acts.list({ workItem: 'github:octo/elsewhere#1' })).toEqual([]);
      expect(await world.acts.list({ since: new Date('2026-03-02T00:00:00.000Z') })).toHaveLength(1);
    });

    it('keeps acts across a restart', async () => {
      await world.acts.save(turn, [act(1, { breach: true })], 'command');
      world = await world.reopen();
      expect(await world.acts.list({ breachesOnly: true })).toMatchObject([{ turnSeq: 2, breach: true }]);
    });
  });
}
