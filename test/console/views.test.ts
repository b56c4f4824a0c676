/**
 * The console's views over a real SQLite registry (sessions, turns, events, acts, the usage
 * ledger): the sessions page's rows (active first, the latest ended ones, unknown never 0, costs from
 * the ledger), a session's page with its turns and acts, the acts page, and the events of a live
 * view after a cursor, bounded.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ACTS_MAX,
  actViews,
  ENDED_ROWS,
  EVENTS_PER_CALL,
  eventViews,
  sessionDetail,
  sessionRows,
} from '../../src/console/views.js';
import type { ActTurn, NewAct } from '../../src/core/ports/acts.js';
import type { Meter, SessionRecord, TurnEnd, TurnRecord } from '../../src/core/ports/sessions.js';
import { Ledger, type LedgerEntry, NO_WIRE_YET } from '../../src/ledger/ledger.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteActStore } from '../../src/store/sqlite/acts.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

let dir: string;
let db: Db;
let store: SqliteSessionStore;
let acts: SqliteActStore;
let ledger: SqliteLedgerStore;
let n = 0;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-console-views-'));
  db = openDb(join(dir, 'the-loop.db'));
  store = new SqliteSessionStore(db, { scrub: (t) => t });
  acts = new SqliteActStore(db, { scrub: (t) => t });
  ledger = new SqliteLedgerStore(db);
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open(item = `github:octo/widgets#${++n}`): Promise<SessionRecord> {
  return store.create({
    workItem: item,
    slug: item.replace(/[^a-z0-9]+/g, '-'),
    engine: 'claude',
    runner: 'tmux',
    engineSessionId: null,
    cwd: dir,
    credentialKind: null,
    credentialEnv: null,
    tmuxTarget: `loop-${item.replace(/[^a-z0-9]+/g, '-')}`,
  });
}

const end = (fields: Partial<TurnEnd> = {}): TurnEnd => ({
  status: 'succeeded',
  endReason: 'result',
  endedAt: new Date().toISOString(),
  exitCode: 0,
  exitSignal: null,
  model: 'claude-x',
  usage: {
    inputTokens: 3,
    outputTokens: 12,
    cacheReadTokens: 100,
    cacheCreationTokens: 7,
    reasoningTokens: 0,
  },
  costUsd: 0.25,
  error: null,
  ...fields,
});

async function turn(
  session: SessionRecord,
  fields?: Partial<TurnEnd> | 'running',
  meter: Meter = 'transcript',
): Promise<TurnRecord> {
  const begun = await store.beginTurn(session.id, { promptDigest: 'sha256:x', promptBytes: 1, meter });
  return fields === 'running' ? begun : store.finishTurn(begun.id, end(fields));
}

const act = (seq: number, extra: Partial<NewAct> = {}): NewAct => ({
  seq,
  toolUseId: `t${seq}`,
  tool: 'Bash',
  kind: 'git-push',
  command: `git push #${seq}`,
  detail: {},
  outcome: 'succeeded',
  verdict: 'allow',
  rule: null,
  breach: false,
  ...extra,
});

const actTurn = (s: SessionRecord, t: TurnRecord, at: string): ActTurn => ({
  id: t.id,
  seq: t.seq,
  sessionId: s.id,
  workItem: s.workItem,
  engine: s.engine,
  runner: s.runner,
  at,
});

describe('sessionRows', () => {
  it('lists the active sessions first (newest first), then the latest ended ones', async () => {
    const a = await open();
    const b = await open();
    await store.close(b.id, 'done');
    const c = await open();
    const d = await open();
    await store.markGone(d.id, 'lost', 'tmux session gone');
    const rows = await sessionRows({ store, ledger });
    expect(rows.map((r) => [r.id, r.status])).toEqual([
      [c.id, 'idle'],
      [a.id, 'idle'],
      [d.id, 'lost'],
      [b.id, 'closed'],
    ]);
  });

  it(`shows at most ${ENDED_ROWS} ended sessions, every active one`, async () => {
    for (let i = 0; i < ENDED_ROWS + 5; i++) await store.close((await open()).id, 'done');
    const active = [await open(), await open()];
    const rows = await sessionRows({ store, ledger });
    expect(rows).toHaveLength(ENDED_ROWS + 2);
    expect(rows.slice(0, 2).map((r) => r.id)).toEqual([active[1]?.id, active[0]?.id]);
  });

  it('sums tokens and cost of the metered, priced turns; unknown stays null, never 0', async () => {
    const mixed = await open();
    await turn(mixed);
    await turn(mixed, { usage: null, costUsd: null });
    await turn(mixed, 'running');
    const unmetered = await open();
    await turn(unmetered, { usage: null, costUsd: null });
    const fresh = await open();
    const rows = new Map((await sessionRows({ store, ledger })).map((r) => [r.id, r]));
    expect(rows.get(mixed.id)).toMatchObject({
      status: 'running',
      turns: 3,
      tokens: 122,
      costUsd: 0.25,
      unmeteredTurns: 1,
      heldReason: null,
      takeover: null,
    });
    expect(rows.get(unmetered.id)).toMatchObject({
      turns: 1,
      tokens: null,
      costUsd: null,
      unmeteredTurns: 1,
    });
    expect(rows.get(fresh.id)).toMatchObject({ turns: 0, tokens: null, costUsd: null, lastTurnAt: null });
  });

  it('a taken-over session is held, with who and why; a hold gives its reason', async () => {
    const s = await open();
    const since = '2026-03-01T10:00:00.000Z';
    await store.setTakeover(s.id, { by: 'alice@host', since, principal: 'p1' });
    const held = await open();
    await store.setHold(held.id, { kind: 'unaccounted', reason: 'no usage record', turnId: 1, since });
    const rows = new Map((await sessionRows({ store, ledger })).map((r) => [r.id, r]));
    expect(rows.get(s.id)).toMatchObject({
      status: 'held',
      heldReason: `taken over by alice@host since ${since}: hand back to go on`,
      takeover: { by: 'alice@host', since, principal: 'p1' },
    });
    expect(rows.get(held.id)).toMatchObject({ status: 'unaccounted', heldReason: 'no usage record' });
  });
});

describe('sessionDetail', () => {
  it('gives the row and each turn with its usage, cost basis and acts in the order they happened', async () => {
    const s = await open();
    const t1 = await turn(s, { costUsd: null });
    const t2 = await turn(s, {
      status: 'failed',
      endReason: 'error',
      error: 'boom',
      usage: null,
      costUsd: null,
    });
    await acts.save(
      actTurn(s, t1, '2026-03-01T10:00:00.000Z'),
      [act(1), act(2, { breach: true, verdict: 'deny', rule: 'protected-branch' })],
      'command',
    );
    await acts.save(actTurn(s, t2, '2026-03-01T10:01:00.000Z'), [act(1)], 'command');
    const detail = await sessionDetail({ store, acts, ledger }, s.id);
    expect(detail?.session).toMatchObject({ id: s.id, turns: 2, status: 'idle' });
    expect(detail?.turns.map((t) => [t.seq, t.acts.map((a) => a.command)])).toEqual([
      [1, ['git push #1', 'git push #2']],
      [2, ['git push #1']],
    ]);
    expect(detail?.turns[0]).toMatchObject({
      status: 'succeeded',
      endReason: 'result',
      meter: 'transcript',
      model: 'claude-x',
      usage: { inputTokens: 3, outputTokens: 12, cacheReadTokens: 100, cacheWriteTokens: 7 },
      costUsd: null,
      costBasis: null,
      warnings: [],
    });
    expect(detail?.turns[0]?.acts[1]).toMatchObject({
      breach: true,
      verdict: 'deny',
      rule: 'protected-branch',
      turnSeq: 1,
    });
    expect(detail?.turns[1]).toMatchObject({
      status: 'failed',
      endReason: 'error',
      error: 'boom',
      usage: null,
    });
  });

  it('an unknown session has no page', async () => {
    expect(
      await sessionDetail({ store, acts, ledger }, '00000000-0000-4000-8000-000000000000'),
    ).toBeUndefined();
  });
});

/** One metered request of a session as the ledger service records it (priced at list price), `wire` by default. */
let sources = 0;
async function record(
  s: SessionRecord,
  t: TurnRecord | null,
  model: string,
  over: Partial<LedgerEntry> = {},
): Promise<void> {
  const entry: LedgerEntry = {
    meter: 'wire',
    sourceId: `anthropic:msg_${++sources}`,
    at: new Date().toISOString(),
    sessionId: s.id,
    workItem: s.workItem,
    turnId: t?.id ?? null,
    engine: 'claude',
    runner: 'tmux',
    model,
    usage: {
      inputTokens: 1000,
      outputTokens: 200,
      cacheReadTokens: 0,
      cacheCreationTokens: 0,
      reasoningTokens: 0,
    },
    payer: { kind: 'subscription', id: null },
    ...over,
  };
  await new Ledger(ledger, priceTable()).add([entry], NO_WIRE_YET);
}
/** One claude-sonnet-4-5 request above at list price: 1,000 in at $3/M, 200 out at $15/M. */
const SONNET = 0.006;

describe('costs from the ledger', () => {
  it('a tmux session metered at the wire: its turns carry no cost, the ledger prices them', async () => {
    const s = await open();
    const t = await turn(s, { costUsd: null }, 'wire');
    await record(s, t, 'claude-sonnet-4-5');
    await record(s, t, 'claude-sonnet-4-5');
    // Between turns (a person typing in the TUI): the session's cost, no turn's.
    await record(s, null, 'claude-sonnet-4-5');
    const [row] = await sessionRows({ store, ledger });
    expect(row).toMatchObject({ id: s.id, unpricedRows: 0, unmeteredTurns: 0 });
    expect(row?.costUsd).toBeCloseTo(3 * SONNET, 10);
    const detail = await sessionDetail({ store, acts, ledger }, s.id);
    expect(detail?.session.costUsd).toBeCloseTo(3 * SONNET, 10);
    expect(detail?.turns[0]).toMatchObject({ costBasis: 'list-price', unpricedRows: 0 });
    expect(detail?.turns[0]?.costUsd).toBeCloseTo(2 * SONNET, 10);
  });

  it('rows of a model with no price: unknown (null) and counted, never $0; beside priced ones, a partial sum', async () => {
    const unpriced = await open();
    // Ended before its rows came: no usage on the turn, but the ledger measured it (not unmetered).
    const u = await turn(unpriced, { usage: null, costUsd: null }, 'wire');
    await record(unpriced, u, 'mystery-model-9');
    await record(unpriced, u, 'mystery-model-9');
    const partial = await open();
    const p = await turn(partial, { costUsd: null }, 'wire');
    await record(partial, p, 'claude-sonnet-4-5');
    await record(partial, p, 'mystery-model-9');
    const rows = new Map((await sessionRows({ store, ledger })).map((r) => [r.id, r]));
    expect(rows.get(unpriced.id)).toMatchObject({ costUsd: null, unpricedRows: 2, unmeteredTurns: 0 });
    expect(rows.get(partial.id)).toMatchObject({ unpricedRows: 1 });
    expect(rows.get(partial.id)?.costUsd).toBeCloseTo(SONNET, 10);
    const none = await sessionDetail({ store, acts, ledger }, unpriced.id);
    expect(none?.turns[0]).toMatchObject({ costUsd: null, costBasis: null, unpricedRows: 2 });
    const some = await sessionDetail({ store, acts, ledger }, partial.id);
    expect(some?.turns[0]).toMatchObject({ costBasis: 'list-price', unpricedRows: 1 });
  });

  it("a turn the ledger has no row of keeps the engine's figure; one it has is counted once", async () => {
    const s = await open();
    // Recorded before the ledger existed: only the turn knows its cost.
    const old = await turn(s, { costUsd: 0.25 });
    const metered = await turn(s, { costUsd: 0.25 }, 'stream-json');
    await record(s, metered, 'claude-x', {
      meter: 'stream-json',
      sourceId: `turn:${metered.id}`,
      engineCostUsd: 0.25,
    });
    const wire = await turn(s, { costUsd: null }, 'wire');
    await record(s, wire, 'claude-sonnet-4-5');
    const [row] = await sessionRows({ store, ledger });
    expect(row?.costUsd).toBeCloseTo(0.5 + SONNET, 10);
    const detail = await sessionDetail({ store, acts, ledger }, s.id);
    expect(detail?.turns.map((t) => [t.id, t.costBasis, t.unpricedRows])).toEqual([
      [old.id, 'engine-reported', 0],
      [metered.id, 'engine-reported', 0],
      [wire.id, 'list-price', 0],
    ]);
    expect(detail?.turns.map((t) => t.costUsd)).toEqual([0.25, 0.25, expect.closeTo(SONNET, 10)]);
  });
});

describe('actViews', () => {
  it('lists acts newest first, the breaches alone, of a work item written in any case, bounded', async () => {
    const s = await open('github:octo/widgets#77');
    const other = await open();
    const t = await turn(s);
    const o = await turn(other);
    await acts.save(
      actTurn(s, t, '2026-03-01T10:00:00.000Z'),
      [act(1), act(2, { breach: true, verdict: 'deny' })],
      'command',
    );
    await acts.save(actTurn(other, o, '2026-03-01T11:00:00.000Z'), [act(1)], 'command');
    expect((await actViews({ acts }, {})).map((a) => a.workItem)).toEqual([
      other.workItem,
      s.workItem,
      s.workItem,
    ]);
    const breaches = await actViews({ acts }, { breaches: true });
    expect(breaches.map((a) => [a.workItem, a.breach])).toEqual([[s.workItem, true]]);
    expect(await actViews({ acts }, { workItem: 'github:Octo/Widgets#77' })).toHaveLength(2);
    expect(await actViews({ acts }, { limit: 1 })).toHaveLength(1);
    expect(await actViews({ acts }, { limit: 10 * ACTS_MAX })).toHaveLength(3);
    await expect(actViews({ acts }, { workItem: 'not a work item' })).rejects.toMatchObject({
      code: 'work-item-invalid',
    });
  });
});

describe('eventViews', () => {
  const text = async (t: TurnRecord, count: number) => {
    for (let i = 0; i < count; i++)
      await store.appendEvent(t.id, { type: 'text', text: `${t.seq}:${i + 1}` });
  };

  it("without a cursor: the running turn's events (its last ones); none for a session without turns", async () => {
    const s = await open();
    expect(await eventViews({ store }, s.id)).toEqual([]);
    const t1 = await turn(s);
    await text(t1, 3);
    const t2 = await turn(s, 'running');
    await text(t2, EVENTS_PER_CALL + 20);
    const events = await eventViews({ store }, s.id);
    expect(events).toHaveLength(EVENTS_PER_CALL);
    expect(events[0]).toMatchObject({ turnId: t2.id, seq: 21, event: { type: 'text', text: '2:21' } });
    expect(events.at(-1)?.seq).toBe(EVENTS_PER_CALL + 20);
  });

  it('with a cursor: what came after it, in its turn and the turns after, at most a bounded number', async () => {
    const s = await open();
    const t1 = await turn(s);
    await text(t1, 5);
    const t2 = await turn(s);
    await text(t2, 2);
    const seen = async (after: { turnId: number; seq: number }) =>
      (await eventViews({ store }, s.id, after)).map((e) => String(e.event.text));
    expect(await seen({ turnId: t1.id, seq: 3 })).toEqual(['1:4', '1:5', '2:1', '2:2']);
    expect(await seen({ turnId: t2.id, seq: 2 })).toEqual([]);
    const t3 = await turn(s, 'running');
    await text(t3, EVENTS_PER_CALL + 1);
    const next = await eventViews({ store }, s.id, { turnId: t2.id, seq: 2 });
    expect(next).toHaveLength(EVENTS_PER_CALL);
    const last = next.at(-1) as { turnId: number; seq: number };
    expect(await eventViews({ store }, s.id, last)).toHaveLength(1);
  });
});
