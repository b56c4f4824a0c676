/**
 * `store copy` carries `github_status` (migration 24): a daemon moved from a SQLite registry to a
 * PostgreSQL store edits the same tracking comments and check runs (GitHub's large ids exactly),
 * and finishes what was left unfinished. The status of a delivery left out of the copy is left out
 * with it, named.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { copySqliteToPg } from '../../../src/store/copy.js';
import { openDb, openDbReadOnly } from '../../../src/store/db.js';
import { PgGithubStatus } from '../../../src/store/postgres/github-status.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { SqliteGithubStatus } from '../../../src/store/sqlite/github-status.js';
import { SqliteInbox } from '../../../src/store/sqlite/inbox.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { delivery, routed } from '../contract/fixtures.js';

const scrub = (text: string) => text;
let dir: string;
let registry: string;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let pg: Pg;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-copy-status-'));
  registry = join(dir, 'the-loop.db');
  database = await freshDatabase();
  pg = await openPg(database.url, { max: 2 });
});

afterEach(async () => {
  await pg?.close();
  await database?.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** A registry whose daemon told GitHub about three deliveries: one running, one finished, one bad. */
async function seed(): Promise<Array<Awaited<ReturnType<SqliteGithubStatus['get']>>>> {
  const db = openDb(registry);
  try {
    const inbox = new SqliteInbox(db, { scrub });
    const ids = ['d-running', 'd-finished', 'd-bad'];
    await inbox.acceptMany(ids.map((id, i) => delivery(id, routed('start', `github:octo/widgets#${i + 1}`))));
    const status = new SqliteGithubStatus(db, { scrub });
    for (const [i, id] of ids.entries()) await status.track(id, `github:octo/widgets#${i + 1}`);
    await status.update('d-running', {
      reacted: true,
      commentId: 2 ** 40 + 3,
      checkRunId: 2 ** 41 + 5,
      checkSha: 'c'.repeat(40),
      phase: 'running',
      digest: 'e'.repeat(64),
      lastError: 'GitHub answered 502 to the last edit',
    });
    await status.update('d-finished', { reacted: true, commentId: 99, phase: 'finished', final: true });
    return Promise.all(ids.map((id) => status.get(id)));
  } finally {
    db.close();
  }
}

async function copy(options: { skipRejected?: boolean } = {}) {
  const sqlite = openDbReadOnly(registry);
  try {
    return await copySqliteToPg(sqlite, pg, { host: 'host-a', ...options });
  } finally {
    sqlite.close();
  }
}

describe('store copy: github_status', () => {
  it('carries every row whole: the same comment and check run ids, the same unfinished rows', async () => {
    const before = await seed();
    const report = await copy();
    expect(report.copied).toBe(true);
    expect(report.tables.find((t) => t.table === 'github_status')?.rows).toBe(3);
    const status = new PgGithubStatus(pg, { scrub });
    for (const row of before) expect(await status.get(row?.deliveryId as string)).toEqual(row);
    expect((await status.unfinished(10)).map((r) => r.deliveryId)).toEqual(['d-running', 'd-bad']);
    expect((await status.get('d-running'))?.commentId).toBe(2 ** 40 + 3);
  });

  it('the status of a delivery left out is left out with it, and named', async () => {
    await seed();
    // A value PostgreSQL's column cannot take (SQLite keeps text in an INTEGER column).
    const raw = openDb(registry);
    raw.prepare("UPDATE deliveries SET attempts = 'x' WHERE id = 'd-bad'").run();
    raw.close();
    const refused = await copy();
    expect(refused.copied).toBe(false);
    expect(refused.rejected).toEqual([
      { table: 'deliveries', key: 'id=d-bad', reason: 'attempts holds "x", not a whole number' },
      { table: 'github_status', key: 'delivery_id=d-bad', reason: 'its delivery (d-bad) is left out' },
    ]);
    const rest = await copy({ skipRejected: true });
    expect(rest.copied).toBe(true);
    expect(rest.tables.find((t) => t.table === 'github_status')?.rows).toBe(2);
    const status = new PgGithubStatus(pg, { scrub });
    expect(await status.get('d-bad')).toBeUndefined();
    expect((await status.unfinished(10)).map((r) => r.deliveryId)).toEqual(['d-running']);
  });
});
