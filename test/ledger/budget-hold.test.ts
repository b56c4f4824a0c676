/**
 * The I/O around the budget rules: the figures read through the budgets' port (turns from the
 * session store's tables, tokens and dollars from the ledger's), the hold set and released through
 * the session store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../src/core/ports/sessions.js';
import { heldReason, holdIfOverBudget } from '../../src/ledger/budget-hold.js';
import type { Budgets } from '../../src/ledger/budget-rules.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteBudgets } from '../../src/store/sqlite/budgets.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

let dir: string;
let db: Db;
let store: SqliteSessionStore;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-budget-hold-'));
  db = openDb(join(dir, 'the-loop.db'));
  store = new SqliteSessionStore(db, { scrub: (t) => t });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const WORK_ITEM = 'github:octo/widgets#7';
const deps = (budgets: Budgets) => ({
  budgets: new SqliteBudgets(db),
  store,
  logger: createLogger({ level: 'error', sinks: [memorySink()] }),
  loaded: { config: { budgets } },
});
const newSession = (): Promise<SessionRecord> =>
  store.create({
    workItem: WORK_ITEM,
    slug: 'github-octo-widgets-7',
    engine: 'claude',
    runner: 'process',
    engineSessionId: null,
    cwd: dir,
    credentialKind: null,
    credentialEnv: null,
  });
const turn = async (session: SessionRecord) => {
  const t = await store.beginTurn(session.id, { promptDigest: 'd', promptBytes: 1, meter: 'stream-json' });
  await store.finishTurn(t.id, {
    status: 'succeeded',
    endReason: 'result',
    endedAt: new Date().toISOString(),
    exitCode: 0,
    exitSignal: null,
    model: null,
    usage: null,
    costUsd: null,
    error: null,
  });
  return t;
};
const spend = (session: SessionRecord, tokens: number) =>
  new Ledger(new SqliteLedgerStore(db), priceTable()).add([
    {
      meter: 'stream-json',
      sourceId: `turn:${tokens}`,
      at: new Date().toISOString(),
      sessionId: session.id,
      workItem: session.workItem,
      turnId: null,
      engine: 'claude',
      runner: 'process',
      model: 'mystery',
      usage: {
        inputTokens: tokens,
        outputTokens: 0,
        cacheReadTokens: 0,
        cacheCreationTokens: 0,
        reasoningTokens: 0,
      },
      payer: { kind: 'unknown', id: null },
    },
  ]);

describe('holding a session over budget', () => {
  it('holds at the turn ceiling, keeps the hold while over, releases it once raised', async () => {
    const d = deps({ session: { maxTurns: 2 }, workItem: {} });
    const session = await newSession();
    await turn(session);
    expect(await heldReason(d, WORK_ITEM)).toBeUndefined();
    await turn(session);
    expect(await heldReason(d, WORK_ITEM)).toBe('turn ceiling reached: 2 turns of 2 turns (session)');
    const held = (await store.get(session.id))?.hold;
    expect(held).toMatchObject({ kind: 'over-budget', dimension: 'turns', used: 2, limit: 2 });
    // Still over: the same hold, not a new one.
    expect(await heldReason(d, WORK_ITEM)).toBe(held?.reason);
    expect((await store.get(session.id))?.hold).toEqual(held);
    const raised = await store.raiseBudget(session.id, { turns: 1 });
    expect(await holdIfOverBudget(d, raised)).toBeNull();
    expect((await store.get(session.id))?.hold).toBeNull();
  });

  it('a breach hold is kept whatever the ceilings say, and the ceilings are not read', async () => {
    const session = await newSession();
    await store.setHold(session.id, {
      kind: 'breach',
      reason: 'pushed to main',
      acts: [],
      turnId: 1,
      since: 'x',
    });
    const d = deps({ session: {}, workItem: {} });
    d.budgets = { usage: () => Promise.reject(new Error('read')) } as never;
    expect(await heldReason(d, WORK_ITEM)).toBe('pushed to main');
  });

  it('tokens of the ledger count against the session and its work item', async () => {
    const session = await newSession();
    await spend(session, 150);
    expect(await heldReason(deps({ session: { maxTokens: 200 }, workItem: {} }), WORK_ITEM)).toBeUndefined();
    expect(await heldReason(deps({ session: {}, workItem: { maxTokens: 100 } }), WORK_ITEM)).toBe(
      'token ceiling reached: 150 tokens of 100 tokens (work-item)',
    );
  });
});

describe('a work item with no active session', () => {
  it('is held by its own ceilings, with the raises of its earlier sessions, and says where to raise them', async () => {
    const first = await newSession();
    await turn(first);
    await turn(first);
    await store.raiseBudget(first.id, { turns: 1 });
    await store.close(first.id, 'done');
    const d = deps({ session: {}, workItem: { maxTurns: 2 } });
    // 2 turns of 2 + 1 raised: not yet.
    expect(await heldReason(d, WORK_ITEM)).toBeUndefined();
    const second = await newSession();
    await turn(second);
    await store.close(second.id, 'done');
    const reason =
      'turn ceiling reached: 3 turns of 3 turns (work-item); raise budgets.workItem in the config to go on';
    expect(await heldReason(d, WORK_ITEM)).toBe(reason);
  });

  it('without work item ceilings nothing is read', async () => {
    const d = deps({ session: { maxTurns: 1 }, workItem: {} });
    d.budgets = { usage: () => Promise.reject(new Error('read')) } as never;
    expect(await heldReason(d, WORK_ITEM)).toBeUndefined();
  });
});
