/**
 * What `sessions list` prints comes out of PostgreSQL as out of SQLite: the same calls, with the same
 * clock, through both session stores give the same records, listings and turns, in the same order
 * (ties of created_at broken by insertion, as SQLite's rowid breaks them).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { SessionRecord, TurnEnd } from '../../../src/core/ports/sessions.js';
import type { SessionListing } from '../../../src/sessions/summary.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { PgSessionStore } from '../../../src/store/postgres/sessions.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { usage } from '../../helpers/usage.js';

type Store = PgSessionStore | SqliteSessionStore;

let dir: string;
let sqlite: Db;
let pg: Pg;
let drop: () => Promise<void>;
let clock: Date;
let stores: Store[];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-pg-list-'));
  sqlite = openDb(join(dir, 'the-loop.db'));
  const database = await freshDatabase();
  drop = database.drop;
  pg = await openPg(database.url, { max: 2 });
  clock = new Date('2026-05-01T10:00:00.000Z');
  const options = { scrub: (t: string) => t, now: () => clock, ownerPid: 4242 };
  stores = [new SqliteSessionStore(sqlite, options), new PgSessionStore(pg, options)];
});

afterEach(async () => {
  sqlite.close();
  rmSync(dir, { recursive: true, force: true });
  await pg.close();
  await drop();
});

const end = (fields: Partial<TurnEnd>): TurnEnd => ({
  status: 'succeeded',
  endReason: 'result',
  endedAt: '2026-05-01T11:00:00.000Z',
  exitCode: 0,
  exitSignal: null,
  model: null,
  usage: null,
  costUsd: null,
  error: null,
  ...fields,
});

const input = (n: number, tmux = false) => ({
  workItem: `github:octo/widgets#${n}`,
  slug: `github-octo-widgets-${n}`,
  engine: n % 2 ? 'claude' : 'codex',
  runner: tmux ? 'tmux' : 'process',
  engineSessionId: null,
  cwd: '/work/widgets',
  credentialKind: null,
  credentialEnv: null,
  tmuxTarget: tmux ? `loop-widgets-${n}` : null,
});

const turn = { promptDigest: 'sha256:x', promptBytes: 1, meter: 'transcript' as const };

/** The same history through one store: sessions created within one instant and across several. */
async function history(store: Store): Promise<void> {
  const s = [] as SessionRecord[];
  for (let n = 1; n <= 6; n++) {
    // Three share an instant (a tie only insertion order breaks), the others follow.
    if (n > 3) clock = new Date(clock.getTime() + 1000);
    s.push(await store.create(input(n, n % 3 === 0)));
  }
  const [a, b, c, d, e, f] = s as [SessionRecord, ...SessionRecord[]] & SessionRecord[];
  for (const [who, ending] of [
    [a, end({ usage: usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 100 }) })],
    [a, end({ status: 'failed', endReason: 'error', error: 'x' })],
    [a, undefined],
    [b, end({ usage: usage({ inputTokens: 1 }) })],
    [d, end({})],
    [e, end({ usage: usage({ inputTokens: 7, reasoningTokens: 3 }) })],
    [e, end({ usage: usage({ inputTokens: 2, outputTokens: 2 }) })],
  ] as const) {
    clock = new Date(clock.getTime() + 60_000);
    const t = await store.beginTurn((who as SessionRecord).id, turn);
    if (ending) await store.finishTurn(t.id, ending);
  }
  await store.close((c as SessionRecord).id, 'done');
  await store.markGone((f as SessionRecord).id, 'lost', 'tmux session gone');
  await store.setHold((b as SessionRecord).id, {
    kind: 'breach',
    reason: 'pushed to main',
    acts: [1],
    turnId: 1,
    since: 'now',
  });
  await store.setWaiting((a as SessionRecord).id, { since: 'now', message: 'allow?' });
  await store.setTakeover((d as SessionRecord).id, { by: 'alice@host', since: 'now', principal: null });
}

/** A store's answers with its session ids named by work item (each store makes up its own ids). */
async function answers(store: Store) {
  const filters = [
    {},
    { status: 'active' as const },
    { status: 'closed' as const },
    { workItem: 'github:Octo/Widgets#1' },
    { status: 'active' as const, limit: 2 },
    { limit: 4 },
  ];
  const records = await Promise.all(filters.map((f) => store.list(f)));
  const ids = new Map(records[0]?.map((r) => [r.id, r.workItem]));
  const name = <T extends { id: string }>(r: T) => ({ ...r, id: ids.get(r.id) });
  const listings: SessionListing[][] = await Promise.all(filters.map((f) => store.listings(f)));
  const all = records[0] ?? [];
  const turns = await store.turnsOfSessions(all.map((r) => r.id));
  return {
    records: records.map((rs) => rs.map(name)),
    listings: listings.map((ls) => ls.map(name)),
    turns: all.map((r) => (turns.get(r.id) ?? []).map((t) => ({ ...t, sessionId: ids.get(t.sessionId) }))),
    engine: (await store.engineSessions()).map(name),
  };
}

it('gives the same records, listings and turns as SQLite for the same history, in the same order', async () => {
  const [lite, post] = stores as [Store, Store];
  const start = clock;
  await history(lite);
  clock = start;
  await history(post);
  const expected = await answers(lite);
  expect(expected.listings[0]?.map((l) => l.workItem)).toEqual([
    'github:octo/widgets#6',
    'github:octo/widgets#5',
    'github:octo/widgets#4',
    'github:octo/widgets#3',
    'github:octo/widgets#2',
    'github:octo/widgets#1',
  ]);
  expect(expected.listings[0]?.at(-1)).toMatchObject({ turns: 3, running: true, tokens: 115 });
  expect(await answers(post)).toEqual(expected);
});

it('takes a listing’s last turn from its highest seq whatever the clocks said', async () => {
  for (const store of stores) {
    const s = await store.create(input(1));
    const begun = [];
    for (const at of ['2026-05-01T10:00:00.000Z', '2026-05-01T12:00:00.000Z', '2026-05-01T09:00:00.000Z']) {
      clock = new Date(at);
      const t = await store.beginTurn(s.id, turn);
      begun.push(t);
      if (begun.length < 3) await store.finishTurn(t.id, end({}));
    }
    expect((await store.listings({}))[0]).toMatchObject({
      turns: 3,
      running: true,
      tokens: null,
      lastTurnAt: '2026-05-01T09:00:00.000Z',
    });
  }
});
