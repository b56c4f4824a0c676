/**
 * Retention on a real SQLite file: rows are written with a clock set in the past (the inbox takes
 * its `now`), and pruning is run with an injected `now` — nothing sleeps.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LoopError } from '../../../src/core/errors.js';
import type { DeliveryRecord, RoutedDelivery } from '../../../src/core/ports/inbox.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { PRUNABLE_SQL, SqliteInbox } from '../../../src/store/sqlite/inbox.js';

const WI = 'github:octo/widgets#7';
const NOW = new Date('2026-03-31T12:00:00.000Z');
const daysAgo = (n: number) => new Date(NOW.getTime() - n * 24 * 60 * 60 * 1000);

let dir: string;
let path: string;
let db: Db;
/** The clock rows are written with; tests move it. */
let clock: Date;
let inbox: SqliteInbox;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-retention-'));
  path = join(dir, 'the-loop.db');
  db = openDb(path);
  clock = daysAgo(40);
  inbox = new SqliteInbox(db, { now: () => clock });
});

afterEach(() => {
  if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

const body = (id: string, size = 1000) => JSON.stringify({ id, pad: 'x'.repeat(size) });

const routed = (route: 'deliver' | 'reject' | 'ignore', workItem = WI): RoutedDelivery =>
  route === 'deliver'
    ? {
        action: 'deliver',
        workItem,
        repo: 'octo/widgets',
        prompt: 'the prompt',
        engine: '',
        runner: '',
        repoPath: '/repos/widgets',
        workspace: 'checkout',
        author: 'octocat',
        trigger: 'mention @the-loop',
      }
    : { action: route, workItem, reason: `${route}ed: why` };

async function accept(
  id: string,
  route: 'deliver' | 'reject' | 'ignore' = 'deliver',
  size = 1000,
  workItem = WI,
) {
  expect(
    await inbox.accept({
      id,
      source: 'github',
      event: 'issue_comment',
      action: 'created',
      body: body(id, size),
      routed: routed(route, workItem),
    }),
  ).toBe('accepted');
}

/** Take a queued delivery, as a dispatch pass does. */
const claim = async (id: string) =>
  (
    await inbox.applyClaims({
      claims: [{ deliveryId: id, workItem: WI, action: 'deliver', source: 'github' }],
      held: [],
      ignored: [],
    })
  ).length === 1;

/** Every kind of row, all received (and last changed) 40 days ago. */
async function seedOld(): Promise<void> {
  await accept('done-1');
  expect(await claim('done-1')).toBe(true);
  await inbox.finish('done-1', { status: 'done', turnId: 11, error: null });
  await accept('failed-1');
  expect(await claim('failed-1')).toBe(true);
  await inbox.finish('failed-1', { status: 'failed', turnId: 12, error: 'engine exited 1' });
  await accept('rejected-1', 'reject');
  await accept('ignored-1', 'ignore');
  await accept('queued-1');
  await accept('held-1');
  await inbox.applyClaims({
    claims: [],
    held: [{ deliveryId: 'held-1', reason: 'over-budget' }],
    ignored: [],
  });
  // Another work item's (one work item runs one delivery at a time, and queued-1 is first in line).
  await accept('running-1', 'deliver', 1000, 'github:octo/widgets#8');
  expect(await claim('running-1')).toBe(true);
}

const meta = (d: DeliveryRecord | undefined) => {
  const { prunedAt: _prunedAt, ...rest } = d as DeliveryRecord;
  return rest;
};

describe('SqliteInbox.prune', () => {
  it('drops the bodies of finished old deliveries, keeps every row, its metadata and outcome', async () => {
    await seedOld();
    const before = new Map((await inbox.list()).map((d) => [d.id, d]));
    expect([...before.values()].every((d) => d.prunedAt === null)).toBe(true);

    const report = await inbox.prune({ retainDays: 30, now: NOW });

    const finished = ['done-1', 'failed-1', 'rejected-1', 'ignored-1'];
    expect(report).toEqual({
      cutoff: '2026-03-01T12:00:00.000Z',
      pruned: 4,
      bytes: finished.reduce((n, id) => n + Buffer.byteLength(body(id)), 0),
      more: false,
      dryRun: false,
    });
    for (const id of finished) {
      const d = await inbox.get(id);
      expect(d?.prunedAt).toBe(NOW.toISOString());
      // Metadata and outcome unchanged: id, event, action, route, work item, reason, status, turn, error, times.
      expect(meta(d)).toEqual(meta(before.get(id)));
      expect(await inbox.body(id)).toBeUndefined();
      expect(db.prepare('SELECT body FROM deliveries WHERE id = ?').get(id)).toEqual({ body: '' });
    }
    expect(await inbox.get('done-1')).toMatchObject({
      status: 'done',
      turnId: 11,
      route: 'deliver',
      workItem: WI,
    });
    expect(await inbox.get('failed-1')).toMatchObject({
      status: 'failed',
      error: 'engine exited 1',
      turnId: 12,
    });
    expect(await inbox.get('rejected-1')).toMatchObject({ status: 'rejected', reason: 'rejected: why' });
    // Pending, held and in-flight deliveries keep their bodies, however old.
    for (const id of ['queued-1', 'held-1', 'running-1']) {
      expect((await inbox.get(id))?.prunedAt).toBeNull();
      expect(await inbox.body(id)).toBe(body(id));
    }
    expect(await inbox.get('held-1')).toMatchObject({ heldReason: 'over-budget', reason: null });
    // Listed as before, newest first, pruned rows included.
    expect((await inbox.list()).map((d) => d.id)).toEqual([...before.keys()]);
    expect((await inbox.pending()).map((d) => d.id)).toEqual(['queued-1', 'held-1', 'running-1']);
    // Nothing left to do: a second pass changes nothing.
    expect(await inbox.prune({ retainDays: 30, now: NOW })).toMatchObject({
      pruned: 0,
      bytes: 0,
      more: false,
    });
    expect((await inbox.get('done-1'))?.prunedAt).toBe(NOW.toISOString());
  });

  it('keeps bodies younger than retainDays, by arrival and by last change', async () => {
    await seedOld();
    clock = daysAgo(10);
    await accept('recent-done');
    await inbox.finish('recent-done', { status: 'done', turnId: null, error: null });
    // Received 40 days ago, failed again (after a retry) 10 days ago: kept for now.
    expect((await inbox.retry('failed-1')).status).toBe('queued');
    expect(await claim('failed-1')).toBe(true);
    await inbox.finish('failed-1', { status: 'failed', turnId: 13, error: 'again' });

    expect((await inbox.prune({ retainDays: 30, now: NOW })).pruned).toBe(3);
    expect(await inbox.body('recent-done')).toBe(body('recent-done'));
    expect(await inbox.body('failed-1')).toBe(body('failed-1'));
    // 21 days on, 30 days have passed since both: then they go.
    const later = new Date(NOW.getTime() + 21 * 24 * 60 * 60 * 1000);
    expect((await inbox.prune({ retainDays: 30, now: later })).pruned).toBe(2);
    expect((await inbox.get('failed-1'))?.prunedAt).toBe(later.toISOString());
    expect(await inbox.body('recent-done')).toBeUndefined();
  });

  it('retainDays 0 keeps every body', async () => {
    await seedOld();
    expect(await inbox.prune({ retainDays: 0, now: NOW })).toEqual({
      cutoff: null,
      pruned: 0,
      bytes: 0,
      more: false,
      dryRun: false,
    });
    expect((await inbox.list()).every((d) => d.prunedAt === null)).toBe(true);
  });

  it('a dry run counts every prunable body and changes nothing', async () => {
    await seedOld();
    const dry = await inbox.prune({ retainDays: 30, now: NOW, dryRun: true, limit: 1 });
    expect(dry).toMatchObject({ pruned: 4, more: false, dryRun: true });
    expect(dry.bytes).toBeGreaterThan(4000);
    expect((await inbox.list()).every((d) => d.prunedAt === null)).toBe(true);
    expect(await inbox.body('done-1')).toBe(body('done-1'));
  });

  it('goes in batches (one transaction each): `limit` rows, or until maxBytes of bodies went', async () => {
    await seedOld();
    const first = await inbox.prune({ retainDays: 30, now: NOW, limit: 3 });
    expect(first).toMatchObject({ pruned: 3, more: true });
    // Oldest first (arrival order among rows received at the same instant).
    expect((await inbox.list()).filter((d) => d.prunedAt).map((d) => d.id)).toEqual([
      'rejected-1',
      'failed-1',
      'done-1',
    ]);
    expect(await inbox.prune({ retainDays: 30, now: NOW, limit: 3 })).toMatchObject({
      pruned: 1,
      more: false,
    });

    // A batch stops once its bodies reach maxBytes: two of ~1,000 reach 2,000, the third waits.
    clock = daysAgo(40);
    for (const id of ['b-1', 'b-2', 'b-3']) await accept(id, 'ignore', 1_000);
    const capped = await inbox.prune({ retainDays: 30, now: NOW, maxBytes: 2_000 });
    expect(capped).toMatchObject({ pruned: 2, more: true });
    expect((await inbox.list({ limit: 3 })).map((d) => [d.id, d.prunedAt !== null])).toEqual([
      ['b-3', false],
      ['b-2', true],
      ['b-1', true],
    ]);
    // One body per batch when each is over the budget: each still goes.
    await accept('huge', 'ignore', 5_000);
    expect(await inbox.prune({ retainDays: 30, now: NOW, maxBytes: 1 })).toMatchObject({
      pruned: 1,
      more: true,
    });
    expect((await inbox.get('b-3'))?.prunedAt).not.toBeNull();
    const last = await inbox.prune({ retainDays: 30, now: NOW, maxBytes: 1 });
    expect(last).toMatchObject({ pruned: 1, more: false });
    expect(last.bytes).toBeGreaterThan(5_000);
    expect((await inbox.get('huge'))?.prunedAt).not.toBeNull();
  });

  it('a pruned body cannot be read, routed or retried: each says so', async () => {
    await seedOld();
    await inbox.prune({ retainDays: 30, now: NOW });
    const read = await thrown(() => inbox.readBody('done-1'));
    expect(read.code).toBe('delivery-pruned');
    expect(read.message).toContain(`pruned at ${NOW.toISOString()}`);
    expect(read.message).toContain('inbox.retainDays');
    const retry = await thrown(() => inbox.retry('failed-1'));
    expect(retry.code).toBe('delivery-pruned');
    expect(retry.message).toMatch(/cannot be retried: its body was pruned/);
    expect((await inbox.get('failed-1'))?.status).toBe('failed');
    expect((await thrown(() => inbox.readBody('no-such'))).message).toBe('no delivery no-such');
    expect(await inbox.readBody('queued-1')).toBe(body('queued-1'));
    // A redelivery of a pruned delivery is still a duplicate: applied once per delivery id.
    expect(
      await inbox.accept({
        id: 'done-1',
        source: 'github',
        event: 'issue_comment',
        action: 'created',
        body: '{}',
        routed: routed('deliver'),
      }),
    ).toBe('duplicate');
  });

  it('survives a reopen; the freed pages are reused (the file does not shrink, auto_vacuum is off)', async () => {
    await seedOld();
    clock = daysAgo(40);
    await accept('big', 'ignore', 8_000_000);
    await inbox.prune({ retainDays: 30, now: NOW });
    expect(db.pragma('auto_vacuum', { simple: true })).toBe(0);
    db.pragma('wal_checkpoint(TRUNCATE)');
    const free = db.pragma('freelist_count', { simple: true }) as number;
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    expect(free * pageSize).toBeGreaterThan(7_000_000);
    db.close();
    db = openDb(path);
    inbox = new SqliteInbox(db, { now: () => NOW });
    expect((await inbox.get('big'))?.prunedAt).toBe(NOW.toISOString());
    // A new body of that size takes the free pages instead of growing the file.
    await accept('big-again', 'deliver', 7_000_000);
    expect(db.pragma('freelist_count', { simple: true }) as number).toBeLessThan(free);
  });
});

describe('migration 13', () => {
  it('adds pruned_at to a registry that has deliveries: they stay, unpruned, bodies intact', async () => {
    db.close();
    rmSync(path);
    db = openDb(
      path,
      MIGRATIONS.filter((m) => m.version < 13),
    );
    db.prepare(
      `INSERT INTO deliveries (id, source, event, action, received_at, body, status, updated_at)
       VALUES ('old', 'github', 'issues', 'opened', '2025-01-01T00:00:00.000Z', '{"a":1}', 'done', '2025-01-01T00:00:00.000Z')`,
    ).run();
    db.close();
    db = openDb(path);
    // Brought to the latest version (13 and every migration after it).
    expect(db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({
      v: Math.max(...MIGRATIONS.map((m) => m.version)),
    });
    inbox = new SqliteInbox(db);
    expect(await inbox.get('old')).toMatchObject({ status: 'done', prunedAt: null });
    expect(await inbox.body('old')).toBe('{"a":1}');
    expect((await inbox.prune({ retainDays: 30, now: NOW })).pruned).toBe(1);
  });

  it('the prune pass reads the covering index, not the table of bodies', async () => {
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${PRUNABLE_SQL}`).all('2026-01-01', '2026-01-01', 101) as {
      detail: string;
    }[];
    const details = plan.map((p) => p.detail).join('\n');
    expect(details).toMatch(/USING COVERING INDEX deliveries_unpruned/);
    // In the index's order: a batch reads as many entries as it takes, never the whole history.
    expect(details).not.toMatch(/TEMP B-TREE/);
  });
});

async function thrown(fn: () => Promise<unknown>): Promise<LoopError> {
  try {
    await fn();
  } catch (error) {
    expect(error).toBeInstanceOf(LoopError);
    return error as LoopError;
  }
  throw new Error('expected a LoopError');
}
