import type { DriveAuditStore, DriveFilter, DriveRecord, OperatorDrives } from '../../core/ports/drives.js';
import type { Db } from '../db.js';
import { DRIVE, DRIVE_COLUMNS, type DriveRow, driveList, storedDrive, toDriveRecord } from '../drive-rows.js';
import { whereOf } from '../filters.js';

/**
 * The terminal connector's audit (the `connector_audit` table): its only reader and writer. Every
 * text passes through `scrub` before it is stored (a terminal's name or an error's message may carry
 * a secret), then is bounded; the payload itself never reaches this store, only its digest and size.
 * The rows, what a record stores and a list's conditions are the PostgreSQL store's too
 * (store/drive-rows.ts).
 */

const INSERT = `INSERT INTO connector_audit (${DRIVE_COLUMNS})
   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

export class SqliteDriveAudit implements DriveAuditStore {
  constructor(
    private readonly db: Db,
    private readonly options: { scrub: (text: string) => string },
  ) {}

  async record(r: DriveRecord): Promise<number> {
    const result = this.db.prepare(INSERT).run(...storedDrive(r, this.options.scrub));
    return Number(result.lastInsertRowid);
  }

  async list(filter: DriveFilter): Promise<Array<DriveRecord & { id: number }>> {
    const { conditions, limit } = driveList(filter);
    const { where, values } = whereOf(conditions, () => '?');
    const rows = this.db
      .prepare(`SELECT * FROM connector_audit ${where} ORDER BY at DESC, id DESC LIMIT ?`)
      .all(...values, limit) as DriveRow[];
    return rows.map(toDriveRecord);
  }

  async byOperator(): Promise<OperatorDrives[]> {
    return this.db
      .prepare(
        `SELECT operator, COUNT(*) AS calls, COUNT(drive) AS drives, MAX(at) AS lastAt, MAX(drive) AS lastDriveAt
         FROM (SELECT operator, at, CASE WHEN ${DRIVE} THEN at END AS drive FROM connector_audit)
         GROUP BY operator ORDER BY operator`,
      )
      .all() as OperatorDrives[];
  }
}
