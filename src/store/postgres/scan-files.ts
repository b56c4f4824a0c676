import type { ScanCursor, ScanCursorStore } from '../../core/ports/ledger.js';
import type { Pg } from './pg.js';

/**
 * `usage scan`'s cursors (the `scan_files` table) on PostgreSQL: its only reader and writer. A host
 * reads and writes its own (`host`): a path names a file of one machine.
 */
export class PgScanCursors implements ScanCursorStore {
  private readonly host: string;

  constructor(
    private readonly db: Pg,
    options: { host?: string } = {},
  ) {
    this.host = options.host ?? '';
  }

  async all(): Promise<Map<string, ScanCursor>> {
    const rows = await this.db.rows<ScanCursor>(
      'SELECT path, inode, size, "offset" FROM scan_files WHERE host = $1',
      [this.host],
    );
    return new Map(rows.map((r) => [r.path, r]));
  }

  async save(cursors: readonly ScanCursor[], at: string): Promise<void> {
    // A path named twice: the last one counts (one row may not be updated twice in a statement).
    // Sorted: two writers upserting the same paths lock them in one order (no deadlock).
    const last = [...new Map(cursors.map((c) => [c.path, c])).values()].sort((a, b) =>
      a.path < b.path ? -1 : a.path > b.path ? 1 : 0,
    );
    if (last.length === 0) return;
    // One statement for the batch (arrays unnested), one transaction: durable once it returns.
    await this.db.tx((q) =>
      q.run(
        `INSERT INTO scan_files (host, path, inode, size, "offset", scanned_at)
         SELECT $6, path, inode, size, o, $5 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
           AS c (path, inode, size, o)
       ON CONFLICT (host, path) DO UPDATE SET inode = excluded.inode, size = excluded.size,
         "offset" = excluded."offset", scanned_at = excluded.scanned_at`,
        [
          last.map((c) => c.path),
          last.map((c) => c.inode),
          last.map((c) => c.size),
          last.map((c) => c.offset),
          at,
          this.host,
        ],
      ),
    );
  }
}
