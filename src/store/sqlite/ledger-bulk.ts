import type { Db } from '../db.js';

/**
 * A transcript import into an empty ledger (a first `usage scan`) writes its first rows without the
 * ledger's two indexes every row enters — the unique key (`usage_ledger_source`, random message ids)
 * and `usage_ledger_at` — and builds both once, sorted, when the window closes: inserting 200,000
 * rows into them one by one, each into a random page, cost more than the rows themselves (and every
 * commit wrote those pages again). Within the window:
 *
 * - the ledger was empty when it opened, in this write transaction: no row of another writer can be
 *   in it (they wait for the lock), and readers keep seeing the last commit, indexes and all;
 * - its rows are the import's new rows (`ImportPiece.add`), whose keys the caller keeps distinct (the
 *   scan keeps one row per request: TranscriptImport), inserted without ON CONFLICT; the unique
 *   index, built again over all of them when the window closes, checks that — a repeated key fails
 *   the import, and nothing of it is kept;
 * - the indexes are made again from their own stored SQL, in the same transaction: a failed import
 *   rolls back to the ledger as it was, indexes included;
 * - it is bounded: the write lock is held for all of it (no commit until it closes), so it closes
 *   once it has been open about LOCK_MS with the time the indexes will take — other writers wait
 *   for the lock up to their busy timeout (5 s, store/db.ts) — and at the first correction or
 *   removal, which look rows up by their key.
 */

/** About the longest the window holds the write lock, its index build included (under the 5 s busy timeout). */
const LOCK_MS = 3000;
/** What building the two indexes takes per row (~0.3 s per 200,000 rows here), with room to spare. */
const BUILD_MS_PER_ROW = 0.003;
/** The indexes left out while the window is open. */
const LEFT_OUT = ['usage_ledger_source', 'usage_ledger_at'];

export class BulkWindow {
  /** Rows inserted in the window (what the index build will take). */
  rows = 0;

  private constructor(
    private readonly db: Db,
    private readonly indexes: readonly string[],
    private readonly opened: number,
  ) {}

  /** Opens a window in the caller's write transaction if the ledger is empty (else undefined). */
  static open(db: Db): BulkWindow | undefined {
    if (db.prepare('SELECT 1 FROM usage_ledger LIMIT 1').get() !== undefined) return undefined;
    const found = db
      .prepare(`SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'usage_ledger'`)
      .all() as Array<{ name: string; sql: string | null }>;
    const sql = LEFT_OUT.map((name) => found.find((i) => i.name === name)?.sql);
    // A ledger of another shape (its key inline, an older schema): no window.
    if (sql.some((s) => typeof s !== 'string')) return undefined;
    for (const name of LEFT_OUT) db.exec(`DROP INDEX ${name}`);
    return new BulkWindow(db, sql as string[], Date.now());
  }

  /** Whether it has been open long enough that it must close now (see LOCK_MS). */
  get due(): boolean {
    return Date.now() - this.opened + this.rows * BUILD_MS_PER_ROW >= LOCK_MS;
  }

  /** The indexes built again (their unique key checked over every row), in the caller's transaction. */
  close(): void {
    for (const sql of this.indexes) this.db.exec(sql);
  }
}
