import type {
  DriveAuditStore,
  DriveFilter,
  DriveOutcome,
  DriveRecord,
  OperatorDrives,
} from '../../core/ports/drives.js';
import type { Pg } from './pg.js';

/**
 * The terminal connector's audit (the `connector_audit` table) on PostgreSQL: its only reader and
 * writer, as store/sqlite/drive-audit.ts. Every text passes through `scrub` before it is stored,
 * then is bounded; the payload itself never reaches this store, only its digest and size. Each
 * call is one statement (an insert, or a read), so two hosts need nothing more than PostgreSQL's
 * own atomicity: ids come from the identity column, and `list` orders by `at`, then `id`.
 */

interface DriveRow {
  id: number;
  at: string;
  operator: string;
  connection: string;
  tool: string;
  backend: string | null;
  target_id: string | null;
  target_name: string | null;
  scope: string | null;
  outcome: DriveOutcome;
  code: string | null;
  payload_sha256: string | null;
  payload_bytes: number;
  detail: string | null;
  work_item: string | null;
}

const INSERT = `INSERT INTO connector_audit (at, operator, connection, tool, backend, target_id, target_name, scope,
     outcome, code, payload_sha256, payload_bytes, detail, work_item)
   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
   RETURNING id`;

/** A row that drove a terminal: a writing tool's call that was not refused (as the ledger counts them). */
const DRIVE = "scope IN ('write', 'destroy') AND outcome <> 'refused'";

/**
 * Per operator, ordered byte-wise (COLLATE "C") as SQLite's BINARY collation orders them, whatever
 * the database's locale.
 */
const BY_OPERATOR = `SELECT operator, COUNT(*) AS calls, COUNT(*) FILTER (WHERE ${DRIVE}) AS drives,
     MAX(at) AS "lastAt", MAX(at) FILTER (WHERE ${DRIVE}) AS "lastDriveAt"
   FROM connector_audit GROUP BY operator ORDER BY operator COLLATE "C"`;

/** The most rows one `list` returns, whatever it asks for. */
const MAX_LIMIT = 100_000;

/**
 * PostgreSQL's text cannot hold U+0000 (SQLite's can): a NUL in an error's message or a terminal's
 * name would make the whole row fail, so it is stored as U+FFFD instead.
 */
const noNul = (text: string): string =>
  text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;

export class PgDriveAudit implements DriveAuditStore {
  constructor(
    private readonly db: Pg,
    private readonly options: { scrub: (text: string) => string },
  ) {}

  async record(r: DriveRecord): Promise<number> {
    // Scrubbed first, then bounded: a cut made before scrubbing could leave half a secret unmasked.
    const text = (value: string, max: number) => noNul(this.options.scrub(value).slice(0, max));
    const maybe = (value: string | null, max: number) => (value === null ? null : text(value, max));
    const row = await this.db.row<{ id: number }>(INSERT, [
      r.at,
      text(r.operator, 100),
      text(r.connection, 200),
      text(r.tool, 200),
      maybe(r.backend, 40),
      maybe(r.targetId, 200),
      maybe(r.targetName, 500),
      maybe(r.scope, 40),
      r.outcome,
      maybe(r.code, 100),
      maybe(r.payloadSha256, 64),
      Math.max(0, Math.floor(r.payloadBytes)),
      maybe(r.detail, 2000),
      maybe(r.workItem, 300),
    ]);
    return Number(row?.id);
  }

  async list(filter: DriveFilter): Promise<Array<DriveRecord & { id: number }>> {
    const where: string[] = [];
    const values: unknown[] = [];
    const add = (clause: (param: string) => string, value: unknown) => {
      values.push(value);
      where.push(clause(`$${values.length}`));
    };
    if (filter.since !== undefined) add((p) => `at >= ${p}`, filter.since);
    if (filter.until !== undefined) add((p) => `at < ${p}`, filter.until);
    if (filter.operator !== undefined) add((p) => `operator = ${p}`, filter.operator);
    values.push(Math.min(MAX_LIMIT, Math.max(0, Math.floor(filter.limit))));
    const rows = await this.db.rows<DriveRow>(
      `SELECT * FROM connector_audit ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY at DESC, id DESC LIMIT $${values.length}`,
      values,
    );
    return rows.map(toRecord);
  }

  async byOperator(): Promise<OperatorDrives[]> {
    return this.db.rows<OperatorDrives>(BY_OPERATOR);
  }
}

function toRecord(r: DriveRow): DriveRecord & { id: number } {
  return {
    id: r.id,
    at: r.at,
    operator: r.operator,
    connection: r.connection,
    tool: r.tool,
    backend: r.backend,
    targetId: r.target_id,
    targetName: r.target_name,
    scope: r.scope,
    outcome: r.outcome,
    code: r.code,
    payloadSha256: r.payload_sha256,
    payloadBytes: r.payload_bytes,
    detail: r.detail,
    workItem: r.work_item,
  };
}
