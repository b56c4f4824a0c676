/**
 * What the port contract suites run against, independent of any store: every port of one store
 * over one backing store (a registry), a second handle on the same backing store (another process's
 * view, for two claimers at once), the same backing store reopened after a close (a restart), and
 * its disposal. SQLite gives one (test/store/sqlite/contract.test.ts); a PostgreSQL store gives its
 * own and must pass the same suites unchanged.
 *
 * The suites call the ports only through these handles, and every call with `await`: a port that is
 * still synchronous (the session store, today) passes the same way as an asynchronous one.
 */
import { afterEach, beforeEach } from 'vitest';
import type { ActStore } from '../../../src/core/ports/acts.js';
import type { BudgetStore } from '../../../src/core/ports/budgets.js';
import type { DriveAuditStore } from '../../../src/core/ports/drives.js';
import type { StatusStore } from '../../../src/core/ports/github-status.js';
import type { Inbox } from '../../../src/core/ports/inbox.js';
import type { LedgerStore, ScanCursorStore } from '../../../src/core/ports/ledger.js';
import type { SessionStore } from '../../../src/core/ports/sessions.js';
import type { TokenStore } from '../../../src/core/ports/tokens.js';

/** Every port of one store, over one backing store. */
export interface Ports {
  sessions: SessionStore;
  inbox: Inbox;
  ledger: LedgerStore;
  acts: ActStore;
  budgets: BudgetStore;
  tokens: TokenStore;
  cursors: ScanCursorStore;
  drives: DriveAuditStore;
  githubStatus: StatusStore;
}

/** A handle on an open backing store. */
export interface StoreHandle extends Ports {
  /**
   * Another handle on the same backing store (another process's view: its own connection, nothing
   * shared in memory with this one). Closed by `reopen` and `dispose`.
   */
  second(): Promise<Ports>;
  /**
   * Close every handle, then open the same backing store again (what a restarted daemon sees). This
   * handle is not used again; the returned one is.
   */
  reopen(): Promise<StoreHandle>;
  /** Close every handle and remove the backing store. */
  dispose(): Promise<void>;
  /**
   * Everything the backing store holds, as text (for the scrubbing checks: a secret handed to the
   * scrubber is nowhere in it). Optional: a store that cannot say leaves it out, and those checks
   * read through the ports only.
   */
  contents?(): Promise<string>;
}

export interface StoreOptions {
  /** The scrubber the stores that scrub are given (sessions, inbox, acts, drives): what they mask. */
  scrub: (text: string) => string;
  /** The clock of the stores that read one themselves (github status); the host's when left out. */
  now?: () => Date;
}

export interface StoreFactory {
  /** Names the store in the suites' titles. */
  name: string;
  /** A fresh, empty backing store (every migration applied), and a handle on it. */
  open(options: StoreOptions): Promise<StoreHandle>;
}

/**
 * A fresh store for each test of the enclosing `describe` (one `useStore` per `describe`), disposed
 * after it. `store()` is the current handle; `restart()` reopens it (and becomes the current handle).
 */
export function useStore(
  factory: StoreFactory,
  options: StoreOptions = { scrub: (text) => text },
): { store(): StoreHandle; restart(): Promise<StoreHandle> } {
  let current: StoreHandle | undefined;
  beforeEach(async () => {
    current = await factory.open(options);
  });
  afterEach(async () => {
    await current?.dispose();
    current = undefined;
  });
  const store = (): StoreHandle => {
    if (!current) throw new Error('no store open (store() is for inside a test)');
    return current;
  };
  return {
    store,
    restart: async () => {
      current = await store().reopen();
      return current;
    },
  };
}
