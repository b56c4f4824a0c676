/**
 * The PostgreSQL session store under two hosts at once: two pools on one database (each its own
 * connections, nothing shared in memory), many calls through both in one Promise.all. Whatever the
 * interleaving: one active session per work item, one slug per work item, one running turn per
 * session numbered without gaps, every raise added, a take over ended once, events numbered
 * without gaps, a lost turn recovered once.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TurnRecord } from '../../../src/core/ports/sessions.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { PgSessionStore } from '../../../src/store/postgres/sessions.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { sessionInput, turnEnd, turnInput, workItem } from '../contract/fixtures.js';

let pools: Pg[] = [];
let drop: () => Promise<void>;
let hosts: [PgSessionStore, PgSessionStore];

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  pools = [await openPg(database.url, { max: 6 }), await openPg(database.url, { max: 6 })];
  const store = (db: Pg) => new PgSessionStore(db, { scrub: (t) => t });
  hosts = [store(pools[0] as Pg), store(pools[1] as Pg)];
});

afterEach(async () => {
  for (const db of pools.splice(0)) await db.close();
  await drop();
});

const N = 24;

/** `n` calls at once, alternating between the two hosts: what each returned, or its LoopError code. */
async function race<T>(n: number, call: (host: PgSessionStore, i: number) => Promise<T>) {
  const settled = await Promise.allSettled(
    Array.from({ length: n }, (_, i) => call(hosts[i % 2] as PgSessionStore, i)),
  );
  const ok = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const codes = settled.flatMap((s) =>
    s.status === 'rejected' ? [String((s.reason as { code?: unknown }).code ?? s.reason)] : [],
  );
  return { ok, codes };
}

describe('PgSessionStore, two hosts at once', () => {
  it('beginTurn: exactly one turn runs, the others are session-busy; turns numbered 1, 2, 3… without gaps', async () => {
    const [a] = hosts;
    const s = await a.create(sessionInput());
    for (let round = 1; round <= 5; round++) {
      const { ok, codes } = await race(N, (host) => host.beginTurn(s.id, turnInput()));
      expect(ok).toHaveLength(1);
      expect(codes).toEqual(Array(N - 1).fill('session-busy'));
      expect(ok[0]?.seq).toBe(round);
      await a.finishTurn(ok[0]?.id as number, turnEnd());
    }
    const turns = await a.turns(s.id);
    expect(turns.map((t) => t.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(turns.every((t) => t.status === 'succeeded')).toBe(true);
  });

  it('beginTurn of many sessions at once: one turn each, each numbered 1', async () => {
    const sessions = await Promise.all(
      Array.from({ length: 6 }, (_, i) => (hosts[i % 2] as PgSessionStore).create(sessionInput())),
    );
    const { ok, codes } = await race(N, (host, i) =>
      host.beginTurn((sessions[i % sessions.length] as { id: string }).id, turnInput()),
    );
    expect(ok.map((t) => t.sessionId).sort()).toEqual(sessions.map((s) => s.id).sort());
    expect(ok.every((t) => t.seq === 1)).toBe(true);
    expect(codes).toEqual(Array(N - sessions.length).fill('session-busy'));
  });

  it('create for one work item: one session is created, the others are session-busy', async () => {
    const item = workItem();
    const { ok, codes } = await race(N, (host) => host.create(sessionInput(item)));
    expect(ok).toHaveLength(1);
    expect(codes).toEqual(Array(N - 1).fill('session-busy'));
    expect((await hosts[1].findActive(item))?.id).toBe(ok[0]?.id);
    expect(await hosts[0].list({ workItem: item })).toHaveLength(1);
  });

  it('create for many work items with one slug: one holds it, the others are slug-collision', async () => {
    const { ok, codes } = await race(N, (host) => host.create(sessionInput(workItem(), { slug: 'shared' })));
    expect(ok).toHaveLength(1);
    expect(codes).toEqual(Array(N - 1).fill('slug-collision'));
    expect((await hosts[0].list()).map((s) => s.id)).toEqual([ok[0]?.id]);
  });

  it('create for many work items with their own slugs: every one is created', async () => {
    const { ok, codes } = await race(N, (host) => host.create(sessionInput()));
    expect(codes).toEqual([]);
    expect(new Set(ok.map((s) => s.slug)).size).toBe(N);
  });

  it('raiseBudget: every raise is added, none overwritten', async () => {
    const s = await hosts[0].create(sessionInput());
    await race(N, (host) => host.raiseBudget(s.id, { turns: 1, usd: 0.5 }));
    expect((await hosts[1].get(s.id))?.budgetRaise).toEqual({ turns: N, usd: N / 2 });
  });

  it('endTakeover: true for exactly one caller', async () => {
    const s = await hosts[0].create(sessionInput());
    const held = { by: 'alice@host', since: '2026-01-01T00:00:00.000Z', principal: null };
    await hosts[0].setTakeover(s.id, held);
    const { ok, codes } = await race(N, (host) => host.endTakeover(s.id, held));
    expect(codes).toEqual([]);
    expect(ok.filter(Boolean)).toHaveLength(1);
    expect((await hosts[1].get(s.id))?.takeover).toBeNull();
  });

  it('setTakeover by two people at once: one holds it, the others are told (usage)', async () => {
    const s = await hosts[0].create(sessionInput());
    const { ok, codes } = await race(N, (host, i) =>
      host.setTakeover(s.id, { by: `p${i}@host`, since: 'now', principal: null }),
    );
    expect(ok).toHaveLength(1);
    expect(codes).toEqual(Array(N - 1).fill('usage'));
    expect((await hosts[1].get(s.id))?.takeover?.by).toBe(ok[0]?.takeover?.by);
  });

  it('appendEvent to one turn from both hosts: numbered 1…n without gaps', async () => {
    const s = await hosts[0].create(sessionInput());
    const turn = await hosts[0].beginTurn(s.id, turnInput());
    const { codes } = await race(N * 2, (host, i) =>
      host.appendEvent(turn.id, { type: 'text', text: `${i}` }),
    );
    expect(codes).toEqual([]);
    const events = await hosts[1].events(turn.id);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: N * 2 }, (_, i) => i + 1));
    expect(new Set(events.map((e) => (e.event as { text: string }).text)).size).toBe(N * 2);
  });

  it('recoverLostTurns and markTurnLost from both hosts: each lost turn is marked once, one drive each', async () => {
    const sessions = await Promise.all(Array.from({ length: 4 }, () => hosts[0].create(sessionInput())));
    const running: TurnRecord[] = [];
    for (const s of sessions) running.push(await hosts[0].beginTurn(s.id, turnInput()));
    const seen: number[] = [];
    // Six recoveries and, meanwhile, two turns marked lost one by one (an adopting host giving up).
    const { ok, codes } = await race(8, async (host, i) => {
      if (i >= 6) {
        await host.markTurnLost((running[i - 6] as { id: number }).id, 'gone');
        return 0;
      }
      return host.recoverLostTurns(
        () => false,
        (t) => seen.push(t.id),
      );
    });
    expect(codes).toEqual([]);
    expect(ok.reduce((sum, n) => sum + n, 0)).toBe(seen.length);
    expect(new Set(seen).size).toBe(seen.length);
    const turns = (await hosts[1].turnsOfSessions(sessions.map((s) => s.id))).values();
    const all = [...turns].flat();
    expect(all.map((t) => [t.status, t.endReason])).toEqual(Array(4).fill(['failed', 'lost']));
    const drives = await (pools[0] as Pg).rows<{ turn_id: number }>(
      'SELECT turn_id FROM unmetered_drives ORDER BY turn_id',
    );
    expect(drives.map((d) => d.turn_id)).toEqual(all.map((t) => t.id).sort((x, y) => x - y));
  });
});
