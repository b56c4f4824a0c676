import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { LoopError } from '../core/errors.js';
import { MIGRATIONS, type Migration } from './migrations/index.js';

export type Db = Database.Database;

let addonPath: string | null | undefined;
/**
 * better-sqlite3's compiled addon, named outright: without it the package finds the file with the
 * `bindings` package, which searches a dozen paths from the caller's stack — slow at every start,
 * and lost inside the CLI's bundle. Null (let the package search) when it is in neither build dir.
 */
function nativeBinding(): string | undefined {
  if (addonPath === undefined) {
    const build = join(dirname(createRequire(import.meta.url).resolve('better-sqlite3')), '..', 'build');
    addonPath =
      ['Release', 'Debug'].map((kind) => join(build, kind, 'better_sqlite3.node')).find(existsSync) ?? null;
  }
  return addonPath ?? undefined;
}

/**
 * Open (creating if needed) the SQLite store and bring it to the latest schema. WAL lets readers
 * (`sessions list` while a turn runs) proceed without blocking the writer; busy_timeout makes a
 * second process wait for the lock instead of failing at once.
 */
export function openDb(path: string, migrations: readonly Migration[] = MIGRATIONS): Db {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let db: Db;
  try {
    const binding = nativeBinding();
    db = new Database(path, binding ? { nativeBinding: binding } : {});
    // Turn events and prompts are private: 0600 (SQLite gives -wal/-shm the same mode).
    if (path !== ':memory:') chmodSync(path, 0o600);
  } catch (cause) {
    throw new LoopError(
      'store-failed',
      `cannot open the registry at ${path}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.pragma('foreign_keys = ON');
    // FULL: a commit (an accepted delivery) survives power loss, not only a crash of this process.
    // Ingress commits in groups, so the fsync is paid once per group.
    db.pragma('synchronous = FULL');
    migrate(db, migrations);
  } catch (cause) {
    db.close();
    if (cause instanceof LoopError) throw cause;
    throw new LoopError('store-failed', `cannot prepare the registry at ${path}: ${String(cause)}`, {
      cause,
    });
  }
  return db;
}

/** The registry's schema version, and the newest the list knows. */
export function schemaVersion(
  db: Db,
  migrations: readonly Migration[] = MIGRATIONS,
): { version: number; latest: number } {
  const row = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
  return { version: row.v ?? 0, latest: migrations.reduce((max, m) => Math.max(max, m.version), 0) };
}

/**
 * Open an existing registry read-only (`store copy`): nothing is written to it, not even a
 * migration; one of another version is refused, naming the command that upgrades it.
 */
export function openDbReadOnly(path: string, migrations: readonly Migration[] = MIGRATIONS): Db {
  let db: Db;
  try {
    const binding = nativeBinding();
    db = new Database(path, {
      readonly: true,
      fileMustExist: true,
      ...(binding ? { nativeBinding: binding } : {}),
    });
  } catch (cause) {
    throw new LoopError(
      'store-failed',
      `cannot open the registry at ${path}: ${cause instanceof Error ? cause.message : String(cause)}`,
      {
        cause,
      },
    );
  }
  const known = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
    .get();
  const { version, latest } = known ? schemaVersion(db, migrations) : { version: 0, latest: -1 };
  if (version !== latest) {
    db.close();
    throw new LoopError(
      'store-failed',
      known
        ? `the registry at ${path} has schema version ${version}; this the-loop copies version ${latest}`
        : `${path} is not a registry of the-loop (no schema_migrations table)`,
      {
        hint: known
          ? version < latest
            ? 'Bring it to this version first: `the-loop store migrate` with a config on that file (store.kind sqlite).'
            : 'Copy it with the-loop of its version, or newer.'
          : 'Name the-loop.db of a data directory: --from <dataDir>/the-loop.db.',
      },
    );
  }
  return db;
}

export function migrate(db: Db, migrations: readonly Migration[]): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`);
  const current =
    (db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null }).v ?? 0;
  const latest = migrations.reduce((max, m) => Math.max(max, m.version), 0);
  if (current > latest) {
    throw new LoopError(
      'store-failed',
      `the registry has schema version ${current}, newer than this the-loop knows (${latest})`,
      { hint: 'Upgrade the-loop, or point --data-dir at another directory.' },
    );
  }
  const pending = [...migrations].sort((a, b) => a.version - b.version).filter((m) => m.version > current);
  // A new registry is made in one transaction (one commit, one fsync: ~0.1-0.2 s less on this kind
  // of disk for 21 migrations; its tables are empty, so no foreign key or cascade differs); an
  // existing one is upgraded a migration at a time, each with the foreign keys it was written for.
  const steps = current === 0 ? [pending] : pending.map((m) => [m]);
  for (const step of steps) if (step.length > 0) migrateStep(db, step);
}

/** Migrations applied in one IMMEDIATE transaction, those already applied (by another process) skipped. */
function migrateStep(db: Db, step: readonly Migration[]): void {
  // PRAGMA foreign_keys is a no-op inside a transaction: it is switched around it.
  const rebuilds = step.some((m) => m.rebuildsTables);
  const foreignKeys = db.pragma('foreign_keys', { simple: true }) === 1;
  if (rebuilds && foreignKeys) db.pragma('foreign_keys = OFF');
  try {
    // IMMEDIATE: the write lock is taken before the check, so two processes opening a new registry
    // at once (`run` and `sessions list`) never apply the same migration twice.
    db.transaction(() => {
      const applied = new Set(db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[]);
      for (const m of step) if (!applied.has(m.version)) applyMigration(db, m);
      if (rebuilds) {
        const broken = db.pragma('foreign_key_check') as unknown[];
        if (broken.length > 0) {
          const names = step.filter((m) => m.rebuildsTables).map((m) => `${m.version} (${m.name})`);
          throw new LoopError(
            'store-failed',
            `migration ${names.join(', ')} would break ${broken.length} foreign key(s)`,
          );
        }
      }
    }).immediate();
  } finally {
    if (rebuilds && foreignKeys) db.pragma('foreign_keys = ON');
  }
}

function applyMigration(db: Db, m: Migration): void {
  db.exec(m.sql);
  m.fill?.(db);
  db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
    m.version,
    m.name,
    new Date().toISOString(),
  );
}
