import type { StatusPatch, StatusRow, StatusStore } from '../../core/ports/github-status.js';
import type { Db } from '../db.js';
import { notInInbox, type StatusDbRow, storedPatch, toStatusRow } from '../github-status-rows.js';

/**
 * What was said on GitHub per delivery (the `github_status` table, migration 24): its only reader
 * and writer. Each call is one statement but `track` (an insert, then a read of the row either way),
 * so nothing here needs a transaction. A stored error is scrubbed, then bounded
 * (store/github-status-rows.ts).
 */
export class SqliteGithubStatus implements StatusStore {
  constructor(
    private readonly db: Db,
    private readonly options: { scrub: (text: string) => string; now?: () => Date },
  ) {}

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  async get(deliveryId: string): Promise<StatusRow | undefined> {
    const row = this.db.prepare('SELECT * FROM github_status WHERE delivery_id = ?').get(deliveryId) as
      | StatusDbRow
      | undefined;
    return row && toStatusRow(row);
  }

  async track(deliveryId: string, workItem: string): Promise<StatusRow> {
    const at = this.now();
    // Only a delivery the inbox holds (the key references it); one already tracked is left as it is.
    this.db
      .prepare(
        `INSERT INTO github_status (delivery_id, work_item, created_at, updated_at)
         SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = ?)
         ON CONFLICT (delivery_id) DO NOTHING`,
      )
      .run(deliveryId, workItem, at, at, deliveryId);
    const row = await this.get(deliveryId);
    if (!row) throw notInInbox(deliveryId);
    return row;
  }

  async update(deliveryId: string, patch: StatusPatch): Promise<void> {
    const set = storedPatch(patch, this.options.scrub);
    if (set.length === 0) return;
    const columns = set.map(([column]) => `${column} = ?`).join(', ');
    this.db
      .prepare(`UPDATE github_status SET ${columns}, updated_at = ? WHERE delivery_id = ?`)
      .run(...set.map(([, value]) => value), this.now(), deliveryId);
  }

  async unfinished(limit: number): Promise<StatusRow[]> {
    const rows = this.db
      .prepare('SELECT * FROM github_status WHERE final = 0 ORDER BY created_at, delivery_id LIMIT ?')
      .all(Math.max(0, Math.floor(limit))) as StatusDbRow[];
    return rows.map(toStatusRow);
  }
}
