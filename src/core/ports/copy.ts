/** `the-loop store copy`: what a copy of a SQLite registry into a PostgreSQL store reports (store/copy.ts). */

export interface RejectedRow {
  table: string;
  /** The row's key, as `column=value` pairs. */
  key: string;
  reason: string;
}

export interface CopyReport {
  /** Rows copied, per table, in copy order. */
  tables: Array<{ table: string; rows: number }>;
  rows: number;
  /** Rows PostgreSQL would reject: left out (`skipRejected`) or the reason nothing was written. */
  rejected: RejectedRow[];
  /** False when rejected rows stopped the copy (nothing was written). */
  copied: boolean;
}

export interface CopyOptions {
  /** Leave the rejected rows out and copy the rest (default: copy nothing, report them). */
  skipRejected?: boolean;
  /** The host whose transcript cursors the SQLite file holds (they become that host's). */
  host?: string | undefined;
  /** Rows per INSERT (default 2000). */
  batch?: number;
  /** Called after each batch: the table and the rows of it copied so far. */
  progress?: (table: string, done: number, total: number) => void;
}
