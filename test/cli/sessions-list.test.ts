/**
 * `sessions list` from the store's listings (one query, no turn read) prints what it printed from
 * the records and their turns: every status a row can show, metered, unmetered and running turns,
 * with and without --all and --work-item.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { listSessions } from '../../src/cli/sessions.js';
import type { SessionStore, TurnEnd } from '../../src/core/ports/sessions.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

let dir: string;
let db: Db;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-sessions-list-'));
  db = openDb(join(dir, 'the-loop.db'));
});

afterEach(() => {
  if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

const end = (usage: TurnEnd['usage'], costUsd: number | null = null): TurnEnd => ({
  status: 'succeeded',
  endReason: 'result',
  endedAt: new Date().toISOString(),
  exitCode: 0,
  exitSignal: null,
  model: null,
  usage,
  costUsd,
  error: null,
});

async function seed(store: SqliteSessionStore): Promise<void> {
  const session = (n: number, runner = 'process') =>
    store.create({
      workItem: `github:octo/widgets#${n}`,
      slug: `github-octo-widgets-${n}-x`,
      engine: n % 2 ? 'claude' : 'codex',
      runner,
      engineSessionId: null,
      cwd: dir,
      credentialKind: null,
      credentialEnv: null,
      ...(runner === 'tmux' ? { tmuxTarget: `loop-${n}` } : {}),
    });
  const turn = (id: string) =>
    store.beginTurn(id, { promptDigest: 'sha256:x', promptBytes: 1, meter: 'transcript' });
  const usage = (i: number) => ({
    inputTokens: 1000 * i,
    outputTokens: 10 * i,
    cacheReadTokens: 123_456,
    cacheCreationTokens: i,
    reasoningTokens: 7,
  });
  // Metered turns, summed; an unmetered one after them; one still running.
  const a = await session(1);
  for (let i = 1; i <= 3; i++) await store.finishTurn((await turn(a.id)).id, end(usage(i), 0.01 * i));
  await store.finishTurn((await turn(a.id)).id, end(null));
  await turn(a.id);
  // Unmetered only; no turn at all; held; waiting; taken over; closed.
  const b = await session(2, 'tmux');
  await store.finishTurn((await turn(b.id)).id, end(null));
  await session(3);
  const held = await session(4);
  await store.setHold(held.id, {
    kind: 'over-budget',
    reason: '2 of 2 turns',
    dimension: 'turns',
    scope: 'session',
    used: 2,
    limit: 2,
    since: '2026-03-01T00:00:00.000Z',
  });
  const waiting = await session(5);
  await store.setWaiting(waiting.id, { since: '2026-03-01T00:00:00.000Z', message: 'Allow?' });
  const taken = await session(6);
  await store.setTakeover(taken.id, { by: 'alice@host', since: '2026-03-01T00:00:00.000Z', principal: null });
  const closed = await session(7);
  await store.finishTurn((await turn(closed.id)).id, end(usage(1)));
  await store.close(closed.id, 'done');
  // A metered turn that used nothing: "0 tokens".
  const zero = await session(8);
  await store.finishTurn(
    (await turn(zero.id)).id,
    end({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, reasoningTokens: 0 }),
  );
}

it('prints the same table from listings as from the records and their turns', async () => {
  const store = new SqliteSessionStore(db, { scrub: (t) => t });
  await seed(store);
  // The port alone: what a store without listings offers.
  const plain = {
    list: store.list.bind(store),
    turnsOfSessions: store.turnsOfSessions.bind(store),
  } as unknown as SessionStore;
  const print = async (s: SessionStore, options: Parameters<typeof listSessions>[2]) => {
    let out = '';
    expect(await listSessions(s, { out: (t: string) => (out += t) } as never, options)).toBe(0);
    return out;
  };
  for (const options of [
    {},
    { all: true },
    { workItem: 'github:octo/widgets#1' },
    { workItem: 'github:octo/widgets#9' },
  ]) {
    const fast = await print(store, options);
    expect(fast).toBe(await print(plain, options));
    expect(fast.length).toBeGreaterThan(0);
  }
  const all = await print(store, { all: true });
  expect(all).toMatch(/github:octo\/widgets#1 .* running .* 5 .* 376,455 tokens/);
  expect(all).toMatch(/github:octo\/widgets#2 .* loop-2 .* unmetered/);
  expect(all).toMatch(/over-budget/);
  expect(all).toMatch(/waiting for a person/);
  expect(all).toMatch(/taken over by alice@host/);
  expect(all).toMatch(/github:octo\/widgets#8 .* 0 tokens/);
});
