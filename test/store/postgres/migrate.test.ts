/**
 * Migrating a PostgreSQL store: hosts starting together on an empty database apply each migration
 * once (advisory lock); a database newer than this the-loop is refused with a hint; a migration that
 * fails leaves the schema as it was (DDL is transactional); an unreachable server is a clear error
 * that never shows the password.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { isLoopError } from '../../../src/core/errors.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { latestVersion, migratePg, openPg } from '../../../src/store/postgres/migrate.js';
import { Pg } from '../../../src/store/postgres/pg.js';
import { freePort } from '../../helpers/cli.js';
import { freshDatabase } from '../../helpers/postgres.js';

const drops: Array<() => Promise<void>> = [];
const pools: Pg[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) await p.close();
  for (const drop of drops.splice(0)) await drop();
});

async function emptyDatabase() {
  const db = await freshDatabase({ empty: true });
  drops.push(db.drop);
  return db;
}

const versions = async (url: string): Promise<number[]> => {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const r = await client.query('SELECT version FROM schema_migrations ORDER BY version');
    return r.rows.map((row) => Number(row.version));
  } finally {
    await client.end();
  }
};

describe('PostgreSQL migrations', () => {
  it('three hosts migrating an empty database at once: each migration applied once, by one of them', async () => {
    const { url } = await emptyDatabase();
    const hosts = [1, 2, 3].map(() => new Pg(url, { max: 2 }));
    pools.push(...hosts);
    const reports = await Promise.all(hosts.map((h) => migratePg(h)));
    const applied = reports.flatMap((r) => r.applied);
    expect(applied.sort((a, b) => a - b)).toEqual(await versions(url));
    expect(reports.filter((r) => r.applied.length > 0)).toHaveLength(1);
    expect(reports.every((r) => r.to === latestVersion())).toBe(true);
    // Opening it again applies nothing.
    expect((await migratePg(hosts[0] as Pg)).applied).toEqual([]);
  });

  it('refuses a database newer than this the-loop, saying what to do', async () => {
    const { url } = await emptyDatabase();
    const db = await openPg(url, { max: 1 });
    await db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 'x')");
    await db.close();
    const error = await openPg(url, { max: 1 }).catch((e: unknown) => e);
    expect(isLoopError(error) && error.code).toBe('store-failed');
    expect(String((error as Error).message)).toMatch(/schema version 9999, newer than this the-loop knows/);
    expect((error as { hint?: string }).hint).toMatch(/Upgrade the-loop/);
  });

  it('a migration that fails changes nothing (the whole step is rolled back)', async () => {
    const { url } = await emptyDatabase();
    const bad = [
      ...MIGRATIONS,
      { version: 900, name: 'half', sql: '', postgres: 'CREATE TABLE half_made (x int); SELECT 1/0;' },
    ];
    const error = await openPg(url, { max: 1, migrations: bad }).catch((e: unknown) => e);
    expect(isLoopError(error) && error.code).toBe('store-failed');
    expect(String((error as Error).message)).toMatch(/division by zero/);
    // Not even the baseline stayed: one transaction.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const tables = await client.query(
      "SELECT to_regclass('half_made') AS half, to_regclass('sessions') AS sessions",
    );
    await client.end();
    expect(tables.rows[0]).toEqual({ half: null, sessions: null });
  });

  it('a command that does not migrate refuses an empty or older store, naming the command that does', async () => {
    const { url } = await emptyDatabase();
    const empty = await openPg(url, { max: 1, migrate: false }).catch((e: unknown) => e);
    expect(String((empty as Error).message)).toBe('the PostgreSQL store has no schema yet');
    expect((empty as { hint?: string }).hint).toMatch(/the-loop store migrate/);
    const older = MIGRATIONS.filter((m) => m.version <= 21);
    await (await openPg(url, { max: 1, migrations: older })).close();
    const behind = await openPg(url, { max: 1, migrate: false }).catch((e: unknown) => e);
    expect(String((behind as Error).message)).toBe(
      `the PostgreSQL store has schema version 21; this the-loop needs ${latestVersion()}`,
    );
    // Nothing was migrated by the refusing opens; the explicit one does it.
    expect(await versions(url)).toEqual([21]);
    await (await openPg(url, { max: 1 })).close();
    await (await openPg(url, { max: 1, migrate: false })).close();
  });

  it('an unreachable server is a clear error without the password', async () => {
    const port = await freePort();
    const error = await openPg(`postgres://loop:s3cret-pw-123@127.0.0.1:${port}/x`, {
      max: 1,
      connectTimeoutMs: 2000,
    }).catch((e: unknown) => e);
    expect(isLoopError(error) && error.code).toBe('store-failed');
    const text = `${(error as Error).message} ${(error as { hint?: string }).hint}`;
    expect(text).toMatch(
      /cannot use the PostgreSQL store at postgres:\/\/loop:\*\*\*@127\.0\.0\.1:\d+\/x: .*ECONNREFUSED/,
    );
    expect(text).not.toContain('s3cret-pw-123');
  });
});
