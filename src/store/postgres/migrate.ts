/**
 * Opening a PostgreSQL store: connect, then bring its schema to the latest version of the one
 * migration list (migrations/index.ts), under an advisory lock so hosts starting together apply
 * each migration once.
 */
import type { QueryConfig } from 'pg';
import { LoopError } from '../../core/errors.js';
import { MIGRATIONS, type Migration } from '../migrations/index.js';
import { POSTGRES_BASELINE, POSTGRES_BASELINE_VERSION } from './baseline.js';
import { checkOut, Pg, type PgOptions, storeUnavailable } from './pg.js';

/** How long the client waits for another host's migration, or a migration's own statements. */
const WAIT_MS = 3_600_000;

/** A statement the client waits for as long as it takes (up to WAIT_MS), not the pool's query timeout. */
const patient = (text: string, values: unknown[] = []): QueryConfig =>
  ({ text, values, query_timeout: WAIT_MS }) as QueryConfig;

/** The advisory lock key every host takes while it migrates (an arbitrary constant: "loopmg" in ASCII). */
const MIGRATE_LOCK = 0x6c6f6f706d67;

export interface MigrateReport {
  /** The schema version found (0: an empty database). */
  from: number;
  to: number;
  /** The versions this call applied (none when another host had, or nothing was pending). */
  applied: number[];
}

/** The newest version the list knows. */
export const latestVersion = (migrations: readonly Migration[] = MIGRATIONS): number =>
  migrations.reduce((max, m) => Math.max(max, m.version), POSTGRES_BASELINE_VERSION);

/**
 * Apply what is pending, in one transaction (PostgreSQL's DDL is transactional: a failed migration
 * leaves the schema as it was). Refuses a database newer than this the-loop.
 */
export async function migratePg(
  db: Pg,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<MigrateReport> {
  const latest = latestVersion(migrations);
  const { client, done } = await checkOut(db.pool);
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    // A host waits for another's migration however long it takes (the pool's statement timeout
    // would cut the wait, and a long migration, short).
    await client.query('SET LOCAL statement_timeout = 0');
    await client.query(patient('SELECT pg_advisory_xact_lock($1)', [MIGRATE_LOCK]));
    // A table lock the DDL cannot get soon (an open transaction of a running host) fails the
    // migration with a clear error instead of stalling every host's writes queued behind it.
    await client.query("SET LOCAL lock_timeout = '15s'");
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`);
    const found = await client.query('SELECT COALESCE(MAX(version), 0)::int AS v FROM schema_migrations');
    const from = Number(found.rows[0]?.v ?? 0);
    if (from > latest) {
      throw new LoopError(
        'store-failed',
        `the PostgreSQL store has schema version ${from}, newer than this the-loop knows (${latest})`,
        {
          hint: 'Upgrade the-loop on this host: every host sharing a store must run the same version or newer.',
        },
      );
    }
    const applied: number[] = [];
    const record = (version: number, name: string) =>
      client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
        version,
        name,
        new Date().toISOString(),
      ]);
    if (from === 0) {
      await client.query(patient(POSTGRES_BASELINE));
      await record(POSTGRES_BASELINE_VERSION, 'postgres-baseline');
      applied.push(POSTGRES_BASELINE_VERSION);
    }
    const pending = [...migrations]
      .sort((a, b) => a.version - b.version)
      .filter((m) => m.version > Math.max(from, POSTGRES_BASELINE_VERSION));
    for (const m of pending) {
      if (m.postgres === undefined)
        throw new LoopError('internal', `migration ${m.version} (${m.name}) has no PostgreSQL text`);
      await client.query(patient(m.postgres));
      await record(m.version, m.name);
      applied.push(m.version);
    }
    await client.query('COMMIT');
    return { from, to: Math.max(from, latest), applied };
  } catch (cause) {
    await client.query('ROLLBACK').catch((e: Error) => {
      broken = e;
    });
    throw cause;
  } finally {
    done(broken);
  }
}

/**
 * A store this the-loop can use as it is, or a LoopError saying what to run: a shared database is
 * migrated on purpose (`the-loop store migrate`, or a daemon starting), never by a reading command
 * of a newer CLI on someone's laptop under hosts still running the older version.
 */
async function requireCurrent(db: Pg, migrations: readonly Migration[] = MIGRATIONS): Promise<void> {
  const latest = latestVersion(migrations);
  const row = await db.row<{ v: number }>(
    "SELECT CASE WHEN to_regclass('schema_migrations') IS NULL THEN 0 ELSE 1 END AS v",
  );
  const version = row?.v ? await schemaVersionPg(db) : 0;
  if (version === latest) return;
  if (version > latest)
    throw new LoopError(
      'store-failed',
      `the PostgreSQL store has schema version ${version}, newer than this the-loop knows (${latest})`,
      {
        hint: 'Upgrade the-loop on this host: every host sharing a store must run the same version or newer.',
      },
    );
  throw new LoopError(
    'store-failed',
    version === 0
      ? 'the PostgreSQL store has no schema yet'
      : `the PostgreSQL store has schema version ${version}; this the-loop needs ${latest}`,
    { hint: 'Run `the-loop store migrate` (a starting daemon migrates it too), then this command again.' },
  );
}

/** The schema version of a migrated store. */
export async function schemaVersionPg(db: Pg): Promise<number> {
  const row = await db.row<{ v: number }>('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations');
  return row?.v ?? 0;
}

/**
 * Connect to the store at `url` and migrate it: the PostgreSQL counterpart of `openDb`. A database
 * that cannot be reached or migrated is a LoopError naming it (never its password).
 */
export async function openPg(
  url: string,
  options: PgOptions & { migrations?: readonly Migration[]; migrate?: boolean } = {},
): Promise<Pg> {
  const db = new Pg(url, options);
  try {
    if (options.migrate === false) await requireCurrent(db, options.migrations);
    else await migratePg(db, options.migrations);
  } catch (cause) {
    await db.close().catch(() => {});
    if (cause instanceof LoopError) throw cause;
    throw storeUnavailable(url, cause);
  }
  return db;
}
