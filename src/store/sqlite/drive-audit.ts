import type {
  DriveAuditStore,
  DriveFilter,
  DriveOutcome,
  DriveRecord,
  OperatorDrives,
} from '../../core/ports/drives.js';
import type { Db } from '../db.js';

/**
 * The terminal connector's audit (the `connector_audit` table): its only reader and writer. Every
 * text passes through `scrub` before it is stored (a terminal's name or an error's message may carry
 * a secret), then is bounded; the payload itself never reaches this store, only its digest and size.
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
   VALUES (@at, @operator, @connection, @tool, @backend, @targetId, @targetName, @scope,
     @outcome, @code, @payloadSha256, @payloadBytes, @detail, @workItem)`;

/** A row that drove a terminal: a writing tool's call that was not refused (as the ledger counts them). */
const DRIVE = "scope IN ('write', 'destroy') AND outcome <> 'refused'";

/** The most rows one `list` returns, whatever it asks for. */
const MAX_LIMIT = 100_000;

export class SqliteDriveAudit implements DriveAuditStore {
  constructor(
    private readonly db: Db,
    private readonly options: { scrub: (text: string) => string },
  ) {}

  async record(r: DriveRecord): Promise<number> {
    // Scrubbed first, then bounded: a cut made before scrubbing could leave half a secret unmasked.
    const text = (value: string, max: number) => this.options.scrub(value).slice(0, max);
    const maybe = (value: string | null, max: number) => (value === null ? null : text(value, max));
    const result = this.db.prepare(INSERT).run({
      at: r.at,
      operator: text(r.operator, 100),
      connection: text(r.connection, 200),
      tool: text(r.tool, 200),
      backend: maybe(r.backend, 40),
      targetId: maybe(r.targetId, 200),
      targetName: maybe(r.targetName, 500),
      scope: maybe(r.scope, 40),
      outcome: r.outcome,
      code: maybe(r.code, 100),
      payloadSha256: maybe(r.payloadSha256, 64),
      payloadBytes: Math.max(0, Math.floor(r.payloadBytes)),
      detail: maybe(r.detail, 2000),
      workItem: maybe(r.workItem, 300),
    });
    return Number(result.lastInsertRowid);
  }

  async list(filter: DriveFilter): Promise<Array<DriveRecord & { id: number }>> {
    const where: string[] = [];
    const args: Record<string, unknown> = {};
    if (filter.since !== undefined) {
      where.push('at >= @since');
      args.since = filter.since;
    }
    if (filter.until !== undefined) {
      where.push('at < @until');
      args.until = filter.until;
    }
    if (filter.operator !== undefined) {
      where.push('operator = @operator');
      args.operator = filter.operator;
    }
    const limit = Math.min(MAX_LIMIT, Math.max(0, Math.floor(filter.limit)));
    const rows = this.db
      .prepare(
        `SELECT * FROM connector_audit ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY at DESC, id DESC LIMIT @limit`,
      )
      .all({ ...args, limit }) as DriveRow[];
    return rows.map(toRecord);
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
