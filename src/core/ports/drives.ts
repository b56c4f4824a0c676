/**
 * The terminal connector's audit (`the-loop mcp`): one row per tool call an operator agent made —
 * who, which tool, which terminal, what came of it — with a SHA-256 and the size of its payload,
 * never the payload itself (text typed into a terminal may carry anything). Every text column is
 * scrubbed of secrets before it is stored. The SQLite store implements it (store/sqlite/drive-audit.ts).
 */

export type DriveOutcome = 'ok' | 'error' | 'refused';

export interface DriveRecord {
  /** When the call ended, ISO 8601. */
  at: string;
  /** The operator whose grant the connection ran under (config `connector.operators.<name>`). */
  operator: string;
  /** The connection's id (one per `the-loop mcp` process, or per HTTP session). */
  connection: string;
  tool: string;
  /** The terminal's backend, id and name, when the call reached one. */
  backend: string | null;
  targetId: string | null;
  targetName: string | null;
  /** The scope the tool needs (its tier); null for a tool with none. */
  scope: string | null;
  outcome: DriveOutcome;
  /** The connector's error code (`E_SCOPE`…), when it failed or was refused. */
  code: string | null;
  /** SHA-256 (hex) of the payload; the payload itself is never stored. */
  payloadSha256: string | null;
  payloadBytes: number;
  /** One line: an exit status, a timeout, an error's message. */
  detail: string | null;
  /** The daemon's work item behind the terminal (a `loop-*` session), when it is one. */
  workItem: string | null;
}

export interface DriveFilter {
  /** From this instant (inclusive), ISO 8601. */
  since?: string | undefined;
  /** Before this instant (exclusive), ISO 8601. */
  until?: string | undefined;
  operator?: string | undefined;
  limit: number;
}

/** Per operator: the calls the audit holds, the drives among them, and when the last of each was. */
export interface OperatorDrives {
  operator: string;
  calls: number;
  /**
   * Calls of a writing tool (scope write or destroy) that were not refused: what the ledger records
   * as unmetered drives.
   */
  drives: number;
  lastAt: string;
  lastDriveAt: string | null;
}

export interface DriveAuditStore {
  /** Store one call (its text scrubbed); its id. */
  record(record: DriveRecord): Promise<number>;
  /** Calls, newest first (by `at`; of one instant, the last stored first); at most `limit`. */
  list(filter: DriveFilter): Promise<Array<DriveRecord & { id: number }>>;
  /** Per operator (by name), its calls and drives and the newest of each (operators with none left out). */
  byOperator(): Promise<OperatorDrives[]>;
}
