/**
 * Migration 14 on a registry an older version wrote: held notes move out of `reason` into their own
 * column; every other row keeps what it had, with no plan (rows routed before plans were stored are
 * routed once more when first run, see test/dispatch/legacy-rows.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { type Db, openDb } from '../../../src/store/db.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { SqliteInbox } from '../../../src/store/sqlite/inbox.js';

let dir: string;
let path: string;
let db: Db;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-migration-14-'));
  path = join(dir, 'the-loop.db');
});

afterEach(() => {
  if (db?.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

const AT = '2026-03-01T00:00:00.000Z';

it('moves `held: ` notes to held_reason and leaves every other reason as it was', async () => {
  db = openDb(
    path,
    MIGRATIONS.filter((m) => m.version < 14),
  );
  const insert = db.prepare(
    `INSERT INTO deliveries (id, source, event, action, received_at, body, status, route, work_item, reason, updated_at)
     VALUES (?, 'github', 'issue_comment', 'created', ?, '{}', ?, ?, ?, ?, ?)`,
  );
  insert.run('held', AT, 'queued', 'deliver', 'github:octo/widgets#7', 'held: turn ceiling reached', AT);
  insert.run(
    'rejected',
    AT,
    'rejected',
    'reject',
    'github:octo/widgets#7',
    'octocat is not in authorization.users',
    AT,
  );
  insert.run('closed', AT, 'done', 'close', 'github:octo/widgets#7', 'issue closed', AT);
  insert.run('queued', AT, 'queued', 'deliver', 'github:octo/widgets#7', null, AT);
  insert.run('unrouted', AT, 'queued', null, null, null, AT);
  db.close();

  db = openDb(path);
  expect(db.prepare('SELECT name FROM schema_migrations WHERE version = 14').get()).toEqual({
    name: 'route-once',
  });
  const inbox = new SqliteInbox(db);
  expect(await inbox.get('held')).toMatchObject({
    status: 'queued',
    route: 'deliver',
    reason: null,
    heldReason: 'turn ceiling reached',
  });
  expect(await inbox.get('rejected')).toMatchObject({
    reason: 'octocat is not in authorization.users',
    heldReason: null,
  });
  expect(await inbox.get('closed')).toMatchObject({ reason: 'issue closed', heldReason: null });
  expect(await inbox.get('unrouted')).toMatchObject({ route: null, workItem: null, heldReason: null });
  // Routed by the old version, but no plan stored: run as routed once more, when first run.
  for (const id of ['held', 'queued', 'unrouted']) expect(await inbox.plan(id)).toBeUndefined();
});

it('a pruned delivery loses its plan with its body (the rendered prompt is outside text too)', async () => {
  const old = new Date('2026-01-01T00:00:00.000Z');
  db = openDb(path);
  const inbox = new SqliteInbox(db, { now: () => old });
  await inbox.accept({
    id: 'd-1',
    source: 'github',
    event: 'issue_comment',
    action: 'created',
    body: '{"comment":{"body":"@the-loop hi"}}',
    routed: {
      action: 'deliver',
      workItem: 'github:octo/widgets#7',
      repo: 'octo/widgets',
      prompt: 'New comment … hi',
      engine: '',
      runner: '',
      repoPath: '/repos/widgets',
      workspace: 'checkout',
      author: 'octocat',
      trigger: 'mention @the-loop',
    },
  });
  const claims = [
    {
      deliveryId: 'd-1',
      workItem: 'github:octo/widgets#7',
      action: 'deliver' as const,
      source: 'github' as const,
    },
  ];
  expect(await inbox.applyClaims({ claims, held: [], ignored: [] })).toEqual(claims);
  await inbox.finish('d-1', { status: 'done', turnId: 1, error: null });
  expect((await inbox.plan('d-1'))?.prompt).toBe('New comment … hi');
  expect(await inbox.prune({ retainDays: 30, now: new Date('2026-03-01T00:00:00.000Z') })).toMatchObject({
    pruned: 1,
  });
  expect(await inbox.plan('d-1')).toBeUndefined();
  expect(db.prepare("SELECT plan FROM deliveries WHERE id = 'd-1'").get()).toEqual({ plan: null });
  expect(await inbox.get('d-1')).toMatchObject({
    status: 'done',
    route: 'deliver',
    workItem: 'github:octo/widgets#7',
  });
});
