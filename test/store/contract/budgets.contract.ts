/**
 * The BudgetStore contract: the figures a ceiling check reads — turns of a session, or of every
 * session of its work item, started since an instant; tokens and priced dollars of the ledger's
 * rows — only those asked, the same from another handle and after a restart.
 */
import { describe, expect, it } from 'vitest';
import { type StoreFactory, useStore } from './factory.js';
import { entry, finishedTurn, openSession, turnInput, usage } from './fixtures.js';

export function budgetsContract(factory: StoreFactory): void {
  describe(`BudgetStore contract (${factory.name})`, () => {
    const { store, restart } = useStore(factory);

    it('counts the turns of a session, and of every session of its work item, since an instant', async () => {
      const first = await openSession(store());
      await finishedTurn(store(), first);
      await finishedTurn(store(), first);
      await store().sessions.close(first.id, 'done');
      const second = await openSession(store(), first.workItem);
      // A running turn counts: it was started.
      await store().sessions.beginTurn(second.id, turnInput());
      const other = await openSession(store());
      await finishedTurn(store(), other);
      const budgets = store().budgets;
      expect(await budgets.usage({ scope: 'session', key: second.id, turnsSince: '' })).toEqual({ turns: 1 });
      expect(await budgets.usage({ scope: 'session', key: first.id, turnsSince: '' })).toEqual({ turns: 2 });
      expect(await budgets.usage({ scope: 'work-item', key: first.workItem, turnsSince: '' })).toEqual({
        turns: 3,
      });
      const future = new Date(Date.now() + 60_000).toISOString();
      expect(await budgets.usage({ scope: 'work-item', key: first.workItem, turnsSince: future })).toEqual({
        turns: 0,
      });
    });

    it("sums all tokens and the priced rows' dollars; only the figures asked are answered", async () => {
      const session = await openSession(store());
      const mine = { sessionId: session.id, workItem: session.workItem };
      await store().ledger.add(
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
      const budgets = store().budgets;
      expect(await budgets.usage({ scope: 'session', key: session.id, spend: true })).toEqual({
        tokens: 117,
        usd: 2.5,
      });
      expect(await budgets.usage({ scope: 'work-item', key: session.workItem, spend: true })).toEqual({
        tokens: 117,
        usd: 2.5,
      });
      expect(await budgets.usage({ scope: 'session', key: session.id })).toEqual({});
    });

    it('answers zero for a session or work item it does not know', async () => {
      const all = { spend: true, turnsSince: '' };
      expect(await store().budgets.usage({ scope: 'session', key: 'no-such-session', ...all })).toEqual({
        turns: 0,
        tokens: 0,
        usd: 0,
      });
      expect(
        await store().budgets.usage({ scope: 'work-item', key: 'github:octo/nothing#1', ...all }),
      ).toEqual({
        turns: 0,
        tokens: 0,
        usd: 0,
      });
    });

    it('gives the same figures from another handle and after a restart', async () => {
      const session = await openSession(store());
      await finishedTurn(store(), session);
      await store().ledger.add(
        [entry({ sessionId: session.id, workItem: session.workItem, sourceId: 'a', usage: usage(3, 4) })],
        () => ({ costUsd: 1.25, basis: 'list-price', priceKey: null, outputUnit: null }),
      );
      const query = { scope: 'work-item' as const, key: session.workItem, turnsSince: '', spend: true };
      const figures = { turns: 1, tokens: 7, usd: 1.25 };
      expect(await store().budgets.usage(query)).toEqual(figures);
      expect(await (await store().second()).budgets.usage(query)).toEqual(figures);
      expect(await (await restart()).budgets.usage(query)).toEqual(figures);
    });
  });
}
