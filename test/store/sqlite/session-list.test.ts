import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Usage } from '../../../src/core/events.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { listingQuery } from '../../../src/store/sqlite/session-list.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { usage } from '../../helpers/usage.js';

let dir: string;
let db: Db;
let store: SqliteSessionStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-session-list-'));
  db = openDb(join(dir, 'the-loop.db'));
  store = new SqliteSessionStore(db, { scrub: (t) => t });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const plan = (filter: Parameters<typeof listingQuery>[0]): string[] => {
  const { sql, args } = listingQuery(filter);
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>).map(
    (r) => r.detail,
  );
};

/** A turn ended: succeeded with `usage` (null: none reported), or failed. */
const finish = (turnId: number, outcome: { usage?: Usage | null; failed?: boolean } = {}) =>
  store.finishTurn(turnId, {
    status: outcome.failed ? 'failed' : 'succeeded',
    endReason: outcome.failed ? 'error' : 'result',
    endedAt: new Date().toISOString(),
    exitCode: outcome.failed ? 1 : 0,
    exitSignal: null,
    model: null,
    usage: outcome.usage ?? null,
    costUsd: null,
    error: outcome.failed ? 'x' : null,
  });

async function session(n: number) {
  return store.create({
    workItem: `github:octo/widgets#${n}`,
    slug: `github-octo-widgets-${n}`,
    engine: 'claude',
    runner: 'process',
    engineSessionId: null,
    cwd: dir,
    credentialKind: null,
    credentialEnv: null,
  });
}

describe('sessions list’s query', () => {
  it('reads the active sessions newest first from their index, with no temporary B-tree', () => {
    const steps = plan({ status: 'active' });
    expect(steps.join('\n')).toMatch(/sessions_active_created/);
    expect(steps.filter((s) => /TEMP B-TREE/.test(s))).toEqual([]);
  });

  it('lists newest first, one row per session with its turns summed, under every filter', async () => {
    const a = await session(1);
    const b = await session(2);
    const c = await session(3);
    for (const s of [a, b, b, c]) {
      const turn = await store.beginTurn(s.id, {
        promptDigest: 'sha256:x',
        promptBytes: 1,
        meter: 'transcript',
      });
      if (s === b) await finish(turn.id);
    }
    await store.close(a.id, 'done');
    const active = await store.listings({ status: 'active' });
    expect(active.map((l) => [l.workItem, l.turns])).toEqual([
      ['github:octo/widgets#3', 1],
      ['github:octo/widgets#2', 2],
    ]);
    expect((await store.listings({})).map((l) => l.workItem)).toEqual([
      'github:octo/widgets#3',
      'github:octo/widgets#2',
      'github:octo/widgets#1',
    ]);
    // Both columns qualified: `turns` has a status too.
    const one = await store.listings({ status: 'active', workItem: 'github:octo/widgets#2' });
    expect(one.map((l) => [l.workItem, l.turns])).toEqual([['github:octo/widgets#2', 2]]);
    expect((await store.listings({ status: 'active', limit: 1 })).map((l) => l.workItem)).toEqual([
      'github:octo/widgets#3',
    ]);
  });
});

describe('a listing’s figures', () => {
  it('last turn is the highest seq’s start (whatever the clocks said), running when any turn runs, tokens summed', async () => {
    const s = await session(1);
    const idle = await session(2);
    const used = usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 100 });
    const turns = [];
    for (let i = 0; i < 3; i++) {
      const t = await store.beginTurn(s.id, {
        promptDigest: 'sha256:x',
        promptBytes: 1,
        meter: 'transcript',
      });
      turns.push(t);
      // The first two end with usage; the third runs.
      if (i < 2) await finish(t.id, { usage: used });
    }
    // A clock set back between turns: the last turn (seq 3) started "before" the first.
    const at = ['2026-05-01T10:00:00.000Z', '2026-05-01T12:00:00.000Z', '2026-05-01T09:00:00.000Z'];
    turns.forEach((t, i) => {
      db.prepare('UPDATE turns SET started_at = ? WHERE id = ?').run(at[i], t.id);
    });
    const [idleListing, listing] = await store.listings({ status: 'active' });
    expect(listing).toMatchObject({ id: s.id, turns: 3, running: true, lastTurnAt: at[2], tokens: 230 });
    expect(idleListing).toMatchObject({
      id: idle.id,
      turns: 0,
      running: false,
      lastTurnAt: null,
      tokens: null,
    });
    // The same figures as the records and their summaries give (`sessions list --json`).
    const summaries = await store.turnsOfSessions([s.id]);
    expect(summaries.get(s.id)?.at(-1)?.startedAt).toBe(listing?.lastTurnAt);
    await finish(turns[2]?.id as number, { failed: true });
    expect((await store.listings({ workItem: 'github:octo/widgets#1' }))[0]).toMatchObject({
      running: false,
      lastTurnAt: at[2],
    });
  });
});
