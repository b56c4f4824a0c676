import type { DriveAuditStore, DriveFilter, DriveRecord, OperatorDrives } from '../../core/ports/drives.js';
import { DRIVE, DRIVE_COLUMNS, type DriveRow, driveList, storedDrive, toDriveRecord } from '../drive-rows.js';
import { whereOf } from '../filters.js';
import { noNul } from '../text.js';
import type { Pg } from './pg.js';

/**
 * The terminal connector's audit (the `connector_audit` table) on PostgreSQL: its only reader and
 * writer, as store/sqlite/drive-audit.ts (its rows, what a record stores and a list's conditions are
 * store/drive-rows.ts). Every text passes through `scrub` before it is stored, then is bounded, then
 * loses any NUL (stored as U+FFFD: PostgreSQL's text holds none); the payload itself never reaches
 * this store, only its digest and size. Each call is one statement (an insert, or a read), so two
 * hosts need nothing more than PostgreSQL's own atomicity: ids come from the identity column, and
 * `list` orders by `at`, then `id`.
 */

const INSERT = `INSERT INTO connector_audit (${DRIVE_COLUMNS})
   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
   RETURNING id`;

/**
 * Per operator, ordered byte-wise (COLLATE "C") as SQLite's BINARY collation orders them, whatever
 * the database's locale.
 */
const BY_OPERATOR = `SELECT operator, COUNT(*) AS calls, COUNT(*) FILTER (WHERE ${DRIVE}) AS drives,
     MAX(at) AS "lastAt", MAX(at) FILTER (WHERE ${DRIVE}) AS "lastDriveAt"
   FROM connector_audit GROUP BY operator ORDER BY operator COLLATE "C"`;

export class PgDriveAudit implements DriveAuditStore {
  constructor(
    private readonly db: Pg,
    private readonly options: { scrub: (text: string) => string },
  ) {}

  async record(r: DriveRecord): Promise<number> {
    const row = await this.db.row<{ id: number }>(INSERT, storedDrive(r, this.options.scrub, noNul));
    return Number(row?.id);
  }

  async list(filter: DriveFilter): Promise<Array<DriveRecord & { id: number }>> {
    const { conditions, limit } = driveList(filter);
    const { where, values } = whereOf(conditions, (n) => `$${n}`);
    values.push(limit);
    const rows = await this.db.rows<DriveRow>(
      `SELECT * FROM connector_audit ${where} ORDER BY at DESC, id DESC LIMIT $${values.length}`,
      values,
    );
    return rows.map(toDriveRecord);
  }

  async byOperator(): Promise<OperatorDrives[]> {
    return this.db.rows<OperatorDrives>(BY_OPERATOR);
  }
}
