import type { ScanCursor, ScanCursorStore } from '../../core/ports/ledger.js';
import type { Pg } from './pg.js';

/** `usage scan`'s cursors (the `scan_files` table) on PostgreSQL: its only reader and writer. */
export class PgScanCursors implements ScanCursorStore {
  constructor(private readonly db: Pg) {}

  async all(): Promise<Map<string, ScanCursor>> {
    const rows = await this.db.rows<ScanCursor>('SELECT path, inode, size, "offset" FROM scan_files');
    return new Map(rows.map((r) => [r.path, r]));
  }

  async save(cursors: readonly ScanCursor[], at: string): Promise<void> {
    // A path named twice: the last one counts (one row may not be updated twice in a statement).
    const last = [...new Map(cursors.map((c) => [c.path, c])).values()];
    if (last.length === 0) return;
    // One statement for the batch (arrays unnested), one transaction: durable once it returns.
    await this.db.run(
      `INSERT INTO scan_files (path, inode, size, "offset", scanned_at)
         SELECT path, inode, size, o, $5 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
           AS c (path, inode, size, o)
       ON CONFLICT (path) DO UPDATE SET inode = excluded.inode, size = excluded.size,
         "offset" = excluded."offset", scanned_at = excluded.scanned_at`,
      [
        last.map((c) => c.path),
        last.map((c) => c.inode),
        last.map((c) => c.size),
        last.map((c) => c.offset),
        at,
      ],
    );
  }
}
