/**
 * The store every command opens (part of the composition root): SQLite (the default, a file in the
 * data directory) or PostgreSQL (`store: { kind: postgres, url }`, shared by several hosts). Both
 * give the same ports; nothing past this file knows which one it has.
 */
import { join } from 'node:path';
import type { ActStore } from './acts/audit.js';
import type { LoadedConfig } from './config/load-types.js';
import type { BudgetStore } from './core/ports/budgets.js';
import type { CopyOptions, CopyReport } from './core/ports/copy.js';
import type { DriveAuditStore } from './core/ports/drives.js';
import type { StatusStore } from './core/ports/github-status.js';
import type { Abandoned, HostStore } from './core/ports/hosts.js';
import type { Inbox } from './core/ports/inbox.js';
import type { LedgerStore, ScanCursorStore } from './core/ports/ledger.js';
import type { SessionFileStore } from './core/ports/session-files.js';
import type { SessionStore } from './core/ports/sessions.js';
import type { TokenStore } from './core/ports/tokens.js';
import type { LeaseKeeper, StrandedSettled } from './hosts/keeper.js';
import { openDb, schemaVersion } from './store/db.js';
import { SqliteActStore } from './store/sqlite/acts.js';
import { SqliteBudgets } from './store/sqlite/budgets.js';
import { SqliteDriveAudit } from './store/sqlite/drive-audit.js';
import { SqliteGithubStatus } from './store/sqlite/github-status.js';
import { SqliteInbox } from './store/sqlite/inbox.js';
import { SqliteLedgerStore } from './store/sqlite/ledger.js';
import { SqliteScanCursors } from './store/sqlite/scan-files.js';
import { SqliteSessionStore } from './store/sqlite/sessions.js';
import { SqliteTokenStore } from './store/sqlite/tokens.js';

/** The session store with what `sessions list` and the dispatcher's lock ask of it beside the port. */
export type RegistryStore = SessionStore & Pick<SqliteSessionStore, 'listings' | 'anyTurnOrphaned'>;

/** What the inbox masks: the scrubber's text pass and, for a payload's bytes, its quick check. */
export interface InboxMasking {
  scrub: (text: string) => string;
  mayHold?: ((bytes: Uint8Array, text: string) => boolean) | undefined;
}

export interface Stores {
  kind: 'sqlite' | 'postgres';
  /**
   * What a store shared by several hosts changes outside the store — the one property code past
   * the composition of the stores asks (never `kind`):
   *
   * - `process-table` (SQLite, one host): turns left running by a dead process are found by this
   *   machine's process table (marked lost, their engines stopped), sessions are reconciled with
   *   the tmux sessions seen here, and `the-loop run` may run a turn in its own process.
   * - `leases` (PostgreSQL, several hosts): a running turn or a tmux session may be another host's,
   *   so none of that is done here: the hosts' leases and their reaper settle what a dead host left
   *   (interrupted, never re-run), and `the-loop run` is refused (the holder's daemon runs turns).
   */
  recovery: 'process-table' | 'leases';
  /** Where, for messages: the registry file, or the database URL without its password. */
  where: string;
  sessions: RegistryStore;
  ledger: LedgerStore;
  acts: ActStore;
  budgets: BudgetStore;
  scanCursors: ScanCursorStore;
  tokens: TokenStore;
  drives: DriveAuditStore;
  /** What was said on GitHub per delivery (issue 18): reaction, tracking comment, check run. */
  githubStatus: StatusStore;
  /** The inbox over the same store. */
  inbox(masking: InboxMasking): Inbox;
  /**
   * The ledger and cursors the transcript watcher writes through: on SQLite a connection of its
   * own (an import's transaction never holds the daemon's), on PostgreSQL the same pool.
   */
  watchStores(): { ledger: LedgerStore; cursors: ScanCursorStore; close(): void };
  /** The schema's version, and the newest this the-loop knows (equal once opened: opening migrates). */
  schema(): Promise<{ version: number; latest: number }>;
  /**
   * PostgreSQL only: copy a SQLite registry (its path) into this store, which must be empty
   * (`the-loop store copy`, store/copy.ts).
   */
  copyFromSqlite?(path: string, options: CopyOptions): Promise<CopyReport>;
  /** PostgreSQL only: the hosts sharing the store and their leases (`hosts list`, the keeper). */
  hosts?: HostStore;
  /** PostgreSQL only: this host's id among them (`store.host`, else the hostname). */
  hostId?: string;
  /**
   * PostgreSQL, the daemon only (`daemon: true`): this host's lease keeper, the fence its session
   * store and inbox check each write against (started by startDaemon, main-hosts.ts).
   */
  keeper?: LeaseKeeper;
  /** PostgreSQL, the daemon only: settle what a dead host left on a work item (the reaper's). */
  interruptAbandoned?(abandoned: Abandoned): Promise<void>;
  /**
   * PostgreSQL, the daemon only: reap expired leases and settle each, one transaction per lease
   * (one that fails is told to `onFailed`, the others settled all the same).
   */
  reapAbandoned?(
    graceSeconds: number,
    onFailed?: (abandoned: Abandoned, error: unknown) => void,
  ): Promise<Abandoned[]>;
  /**
   * PostgreSQL, the daemon only: settle the deliveries of a work item this host holds left running
   * with no turn here (the dispatcher's sweep, through the keeper).
   */
  settleStranded?(held: Abandoned): Promise<StrandedSettled>;
  /**
   * PostgreSQL only: process-runner sessions' conversation files, carried between hosts
   * (sessions/carry.ts). One host keeps them where the engine wrote them.
   */
  sessionFiles?: SessionFileStore;
  /** The database URL (PostgreSQL: the daemon's own LISTEN connection is made over it). */
  url?: string;
  /** Release the connection(s). Idempotent. */
  close(): Promise<void>;
}

export const registryPath = (dataDir: string) => join(dataDir, 'the-loop.db');

/**
 * Open the configured store. SQLite is migrated on opening (a file of one host); PostgreSQL only when
 * `migrate` says so (a daemon starting, `store migrate`): otherwise an older schema is an error
 * naming the command that migrates it.
 */
export async function openStores(
  loaded: LoadedConfig,
  scrub: (text: string) => string,
  options: { migrate?: boolean | undefined; daemon?: boolean | undefined } = {},
): Promise<Stores> {
  const store = loaded.config.store;
  // Loaded only when configured: the PostgreSQL client is not read by every command on SQLite.
  if (store.kind === 'postgres')
    return (await import('./main-store-pg.js')).openPostgresStores(store, scrub, {
      daemon: options.daemon === true,
      migrate: options.migrate === true,
      concurrency: loaded.config.dispatch.concurrency,
    });
  return sqliteStores(registryPath(loaded.dataDir), scrub);
}

function sqliteStores(path: string, scrub: (text: string) => string): Stores {
  const db = openDb(path);
  return {
    kind: 'sqlite',
    recovery: 'process-table',
    where: path,
    sessions: new SqliteSessionStore(db, { scrub }),
    ledger: new SqliteLedgerStore(db),
    acts: new SqliteActStore(db, { scrub }),
    budgets: new SqliteBudgets(db),
    scanCursors: new SqliteScanCursors(db),
    tokens: new SqliteTokenStore(db),
    drives: new SqliteDriveAudit(db, { scrub }),
    githubStatus: new SqliteGithubStatus(db, { scrub }),
    inbox: (masking) => new SqliteInbox(db, masking),
    watchStores: () => {
      const own = openDb(path);
      return {
        ledger: new SqliteLedgerStore(own),
        cursors: new SqliteScanCursors(own),
        close: () => {
          if (own.open) own.close();
        },
      };
    },
    schema: async () => schemaVersion(db),
    close: async () => {
      if (db.open) db.close();
    },
  };
}
