/**
 * The contracts of the smaller ports: the budgets' figures (turns of a session or of its work item
 * in a window, tokens and priced dollars), the capability tokens' hashes (named until revoked, seen
 * revoked by another connection, kept across a restart) and the scan cursors.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { entry, newSession, newTurn, type OpenWorld, type PortWorld, usage } from './world.js';

export function budgetsContract(open: OpenWorld): void {
  describe('BudgetStore contract', () => {
    let world: PortWorld;
    beforeEach(async () => {
      world = await open({ scrub: (t) => t });
    });
    afterEach(async () => {
      await world.close();
    });

    it('counts the turns of a session, and of every session of its work item, since a time', async () => {
      const first = await newSession(world);
      await newTurn(world, first);
      await newTurn(world, first);
      await world.sessions.close(first.id, 'done');
      const second = await newSession(world, first.workItem);
      await newTurn(world, second);
      const other = await newSession(world);
      await newTurn(world, other);
      expect(await world.budgets.usage({ scope: 'session', key: second.id, turnsSince: '' })).toEqual({
        turns: 1,
      });
      expect(await world.budgets.usage({ scope: 'work-item', key: first.workItem, turnsSince: '' })).toEqual({
        turns: 3,
      });
      const future = new Date(Date.now() + 60_000).toISOString();
      expect(
        await world.budgets.usage({ scope: 'work-item', key: first.workItem, turnsSince: future }),
      ).toEqual({
        turns: 0,
      });
    });

    it("sums all tokens and the priced rows' dollars; only the figures asked are answered", async () => {
      const session = await newSession(world);
      const mine = { sessionId: session.id, workItem: session.workItem };
      await world.ledger.add(
        [
          entry({ ...mine, sourceId: 'a', usage: { ...usage(10, 5), cacheReadTokens: 100 } }),
          entry({ ...mine, sourceId: 'b', usage: usage(1, 1) }),
          entry({ sourceId: 'c', usage: usage(1000, 1000) }),
        ],
        (e) => ({
          costUsd: e.sourceId === 'b' ? null : 2.5,
          basis: e.sourceId === 'b' ? null : 'list-price',
          priceKey: null,
          outputUnit: null,
        }),
      );
      expect(await world.budgets.usage({ scope: 'session', key: session.id, spend: true })).toEqual({
        tokens: 117,
        usd: 2.5,
      });
      expect(await world.budgets.usage({ scope: 'work-item', key: session.workItem, spend: true })).toEqual({
        tokens: 117,
        usd: 2.5,
      });
      expect(await world.budgets.usage({ scope: 'session', key: session.id })).toEqual({});
      expect(
        await world.budgets.usage({ scope: 'session', key: 'nobody', spend: true, turnsSince: '' }),
      ).toEqual({
        turns: 0,
        tokens: 0,
        usd: 0,
      });
    });
  });
}

export function tokensContract(open: OpenWorld): void {
  describe('TokenStore contract', () => {
    let world: PortWorld;
    const extra: PortWorld[] = [];
    beforeEach(async () => {
      world = await open({ scrub: (t) => t });
    });
    afterEach(async () => {
      for (const w of extra.splice(0)) await w.close();
      await world.close();
    });

    it("names a kept hash's session until it is revoked, one token or all of a session's", async () => {
      const a = await newSession(world);
      const b = await newSession(world);
      const at = '2026-03-01T10:00:00.000Z';
      await world.tokens.add('h1', a.id, at);
      await world.tokens.add('h2', a.id, at);
      await world.tokens.add('h3', b.id, at);
      expect(await world.tokens.sessionOf('h1')).toBe(a.id);
      expect(await world.tokens.sessionOf('nope')).toBeUndefined();
      await world.tokens.revoke('h3', at);
      await world.tokens.revoke('h3', at);
      await world.tokens.revoke('nope', at);
      expect(await world.tokens.sessionOf('h3')).toBeUndefined();
      expect(await world.tokens.revokeSession(a.id, at)).toBe(2);
      expect(await world.tokens.revokeSession(a.id, at)).toBe(0);
      expect(await world.tokens.sessionOf('h1')).toBeUndefined();
    });

    it('a revocation is seen by another connection, and tokens outlive a restart', async () => {
      const s = await newSession(world);
      await world.tokens.add('kept', s.id, 'now');
      await world.tokens.add('revoked', s.id, 'now');
      const other = await world.another();
      extra.push(other);
      await other.tokens.revoke('revoked', 'now');
      expect(await world.tokens.sessionOf('revoked')).toBeUndefined();
      world = await world.reopen();
      expect(await world.tokens.sessionOf('kept')).toBe(s.id);
    });
  });
}

export function cursorsContract(open: OpenWorld): void {
  describe('ScanCursorStore contract', () => {
    let world: PortWorld;
    beforeEach(async () => {
      world = await open({ scrub: (t) => t });
    });
    afterEach(async () => {
      await world.close();
    });

    it('saves a cursor per path (the last save wins) and keeps them across a restart', async () => {
      expect(await world.cursors.all()).toEqual(new Map());
      await world.cursors.save(
        [
          { path: '/a.jsonl', inode: 1, size: 10, offset: 10 },
          { path: '/b.jsonl', inode: 2, size: 20, offset: 15 },
        ],
        'then',
      );
      await world.cursors.save([{ path: '/a.jsonl', inode: 3, size: 30, offset: 30 }], 'now');
      world = await world.reopen();
      expect(await world.cursors.all()).toEqual(
        new Map([
          ['/a.jsonl', { path: '/a.jsonl', inode: 3, size: 30, offset: 30 }],
          ['/b.jsonl', { path: '/b.jsonl', inode: 2, size: 20, offset: 15 }],
        ]),
      );
    });
  });
}
