import type { StatusPatch, StatusRow, StatusStore } from '../../core/ports/github-status.js';
import { notInInbox, type StatusDbRow, storedPatch, toStatusRow } from '../github-status-rows.js';
import { noNul } from '../text.js';
import type { Pg } from './pg.js';

/**
 * What was said on GitHub per delivery (the `github_status` table, migration 24) on PostgreSQL: its
 * only reader and writer, as store/sqlite/github-status.ts. A stored error is scrubbed, bounded,
 * then loses any NUL (PostgreSQL's text holds none); ids are BIGINT, read back as numbers (pg.ts).
 * Each call is one statement but `track` (an insert, then a read of the row either way), so two
 * hosts need nothing more than PostgreSQL's own atomicity. Instants are the host's ISO-8601 text,
 * as the inbox's are: `unfinished` orders by them, byte by byte, ties by delivery id.
 */
export class PgGithubStatus implements StatusStore {
  constructor(
    private readonly db: Pg,
    private readonly options: { scrub: (text: string) => string; now?: () => Date },
  ) {}

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  async get(deliveryId: string): Promise<StatusRow | undefined> {
    const row = await this.db.row<StatusDbRow>('SELECT * FROM github_status WHERE delivery_id = $1', [
      noNul(deliveryId),
    ]);
    return row && toStatusRow(row);
  }

  async track(deliveryId: string, workItem: string): Promise<StatusRow> {
    const at = this.now();
    // Only a delivery the inbox holds (the key references it); one already tracked is left as it is.
    await this.db.run(
      `INSERT INTO github_status (delivery_id, work_item, created_at, updated_at)
       SELECT $1, $2, $3, $3 WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = $1)
       ON CONFLICT (delivery_id) DO NOTHING`,
      [noNul(deliveryId), noNul(workItem), at],
    );
    const row = await this.get(deliveryId);
    if (!row) throw notInInbox(deliveryId);
    return row;
  }

  async update(deliveryId: string, patch: StatusPatch): Promise<void> {
    const set = storedPatch(patch, this.options.scrub, noNul);
    if (set.length === 0) return;
    const columns = set.map(([column], i) => `${column} = $${i + 1}`).join(', ');
    const n = set.length;
    await this.db.run(
      `UPDATE github_status SET ${columns}, updated_at = $${n + 1} WHERE delivery_id = $${n + 2}`,
      [...set.map(([, value]) => value), this.now(), noNul(deliveryId)],
    );
  }

  async unfinished(limit: number): Promise<StatusRow[]> {
    const rows = await this.db.rows<StatusDbRow>(
      `SELECT * FROM github_status WHERE final = 0
        ORDER BY created_at, delivery_id COLLATE "C" LIMIT $1`,
      [Math.max(0, Math.floor(limit))],
    );
    return rows.map(toStatusRow);
  }
}
