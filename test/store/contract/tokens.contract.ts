/**
 * The TokenStore contract: a kept hash names its session until it is revoked (one token, or all of
 * a session's), each mint one token of its own, a revocation seen by another handle and made once
 * when two make it at once, kept tokens and revocations across a restart.
 */
import { describe, expect, it } from 'vitest';
import { type StoreFactory, useStore } from './factory.js';
import { openSession } from './fixtures.js';

const AT = '2026-03-01T10:00:00.000Z';

export function tokensContract(factory: StoreFactory): void {
  describe(`TokenStore contract (${factory.name})`, () => {
    const { store, restart } = useStore(factory);

    it("names a kept hash's session until it is revoked, one token or all of a session's", async () => {
      const a = await openSession(store());
      const b = await openSession(store());
      const tokens = store().tokens;
      await tokens.add('h1', a.id, AT);
      await tokens.add('h2', a.id, AT);
      await tokens.add('h3', b.id, AT);
      expect(await tokens.sessionOf('h1')).toBe(a.id);
      expect(await tokens.sessionOf('h3')).toBe(b.id);
      await tokens.revoke('h3', AT);
      await tokens.revoke('h3', AT);
      expect(await tokens.sessionOf('h3')).toBeUndefined();
      expect(await tokens.revokeSession(a.id, AT)).toBe(2);
      expect(await tokens.revokeSession(a.id, AT)).toBe(0);
      expect(await tokens.sessionOf('h1')).toBeUndefined();
      expect(await tokens.sessionOf('h2')).toBeUndefined();
    });

    it('keeps one token per mint: revoking one leaves the others of its session', async () => {
      const s = await openSession(store());
      for (const hash of ['m1', 'm2', 'm3']) await store().tokens.add(hash, s.id, AT);
      await store().tokens.revoke('m2', AT);
      expect(await store().tokens.sessionOf('m1')).toBe(s.id);
      expect(await store().tokens.sessionOf('m3')).toBe(s.id);
      expect(await store().tokens.revokeSession(s.id, AT)).toBe(2);
    });

    it('answers unknown hashes and sessions with nothing, not a failure', async () => {
      expect(await store().tokens.sessionOf('nope')).toBeUndefined();
      await store().tokens.revoke('nope', AT);
      expect(await store().tokens.revokeSession('no-such-session', AT)).toBe(0);
    });

    it('a revocation is seen by another handle; two revoking one session at once revoke each token once', async () => {
      const s = await openSession(store());
      for (const hash of ['a', 'b', 'c', 'd']) await store().tokens.add(hash, s.id, AT);
      const other = await store().second();
      expect(await other.tokens.sessionOf('a')).toBe(s.id);
      await other.tokens.revoke('a', AT);
      expect(await store().tokens.sessionOf('a')).toBeUndefined();
      const counts = await Promise.all([
        store().tokens.revokeSession(s.id, AT),
        other.tokens.revokeSession(s.id, AT),
      ]);
      expect(counts[0] + counts[1]).toBe(3);
      for (const hash of ['b', 'c', 'd']) expect(await other.tokens.sessionOf(hash)).toBeUndefined();
    });

    it('kept tokens outlive a restart; a token of a closed session stays revoked', async () => {
      const open = await openSession(store());
      const closed = await openSession(store());
      await store().tokens.add('kept', open.id, AT);
      await store().tokens.add('revoked', open.id, AT);
      await store().tokens.revoke('revoked', AT);
      await store().tokens.add('of-closed', closed.id, AT);
      // What the composition root does when a session ends: its tokens are revoked with it.
      await store().sessions.close(closed.id, 'merged');
      expect(await store().tokens.revokeSession(closed.id, AT)).toBe(1);
      const after = await restart();
      expect(await after.tokens.sessionOf('kept')).toBe(open.id);
      expect(await after.tokens.sessionOf('revoked')).toBeUndefined();
      expect(await after.tokens.sessionOf('of-closed')).toBeUndefined();
      expect(await after.tokens.revokeSession(closed.id, AT)).toBe(0);
    });
  });
}
