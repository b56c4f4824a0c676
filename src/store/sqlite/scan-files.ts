import type { ScanCursor, ScanCursorStore } from '../../core/ports/ledger.js';
import type { Db } from '../db.js';

/** `usage scan`'s cursors (the `scan_files` table): its only reader and writer. */
export class SqliteScanCursors implements ScanCursorStore {
  constructor(private readonly db: Db) {}

  async all(): Promise<Map<string, ScanCursor>> {
    const rows = this.db.prepare('SELECT path, inode, size, offset FROM scan_files').all() as ScanCursor[];
    return new Map(rows.map((r) => [r.path, r]));
  }

  async save(cursors: readonly ScanCursor[], at: string): Promise<void> {
    const save = this.db.prepare(
      `INSERT INTO scan_files (path, inode, size, offset, scanned_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (path) DO UPDATE SET inode = excluded.inode, size = excluded.size, offset = excluded.offset,
           scanned_at = excluded.scanned_at`,
    );
    // Committed with the connection's own synchronous setting (FULL): durable once saved.
    this.db.transaction(() => {
      for (const c of cursors) save.run(c.path, c.inode, c.size, c.offset, at);
    })();
  }
}
