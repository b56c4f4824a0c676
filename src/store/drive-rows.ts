import type { DriveFilter, DriveOutcome, DriveRecord } from '../core/ports/drives.js';
import type { Condition } from './filters.js';

/**
 * The terminal connector's audit rows (`connector_audit`) as both stores read and write them
 * (store/sqlite/drive-audit.ts, store/postgres/drive-audit.ts): the row, its record, what a record
 * stores (scrubbed, then bounded), a list's conditions and limit.
 */

export interface DriveRow {
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

/** The columns a record fills, in the order `storedDrive` gives their values. */
export const DRIVE_COLUMNS = `at, operator, connection, tool, backend, target_id, target_name, scope,
     outcome, code, payload_sha256, payload_bytes, detail, work_item`;

/** A row that drove a terminal: a writing tool's call that was not refused (as the ledger counts them). */
export const DRIVE = "scope IN ('write', 'destroy') AND outcome <> 'refused'";

/** The most rows one `list` returns, whatever it asks for. */
const MAX_LIMIT = 100_000;

/**
 * A record's values in DRIVE_COLUMNS' order: each text scrubbed first, then bounded (a cut made
 * before scrubbing could leave half a secret unmasked), then finished by `text` (PostgreSQL's takes
 * out NUL; SQLite keeps them as they are).
 */
export function storedDrive(
  r: DriveRecord,
  scrub: (text: string) => string,
  text: (value: string) => string = (value) => value,
): unknown[] {
  const bounded = (value: string, max: number) => text(scrub(value).slice(0, max));
  const maybe = (value: string | null, max: number) => (value === null ? null : bounded(value, max));
  return [
    r.at,
    bounded(r.operator, 100),
    bounded(r.connection, 200),
    bounded(r.tool, 200),
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
  ];
}

/** A list's conditions, in the order both stores bind them, and its limit (a whole number from 0 to MAX_LIMIT). */
export function driveList(filter: DriveFilter): { conditions: Condition[]; limit: number } {
  const conditions: Condition[] = [];
  if (filter.since !== undefined) conditions.push({ column: 'at', op: '>=', value: filter.since });
  if (filter.until !== undefined) conditions.push({ column: 'at', op: '<', value: filter.until });
  if (filter.operator !== undefined) conditions.push({ column: 'operator', op: '=', value: filter.operator });
  return { conditions, limit: Math.min(MAX_LIMIT, Math.max(0, Math.floor(filter.limit))) };
}

export function toDriveRecord(r: DriveRow): DriveRecord & { id: number } {
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
