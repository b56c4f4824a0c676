import type { Usage } from '../events.js';
import type { Meter } from './sessions.js';

/**
 * The usage ledger as the centre sees it (invariant 2): every metered request or turn as a row,
 * idempotent per (meter, source id), and every run nothing measured as an unmetered drive. The
 * SQLite store implements it (store/sqlite/ledger.ts); the ledger service (ledger/ledger.ts) prices
 * what it adds.
 */

export type PayerKind = 'api-key' | 'subscription' | 'cloud' | 'unknown';

export interface Payer {
  kind: PayerKind;
  /** `key:<12 hex>` for an API key, `bedrock` / `vertex` for a cloud account, null otherwise. */
  id: string | null;
}

export interface LedgerEntry {
  meter: Exclude<Meter, 'none'>;
  sourceId: string;
  at: string;
  sessionId: string | null;
  workItem: string | null;
  turnId: number | null;
  engine: string | null;
  runner: string | null;
  model: string | null;
  usage: Usage;
  /** The engine's own figure, when it gave one. */
  engineCostUsd?: number | null | undefined;
  payer: Payer;
  /** The source ended before its final figures (a cut response): what it got to. */
  partial?: boolean | undefined;
}

/**
 * How one row is priced. `outputUnit`: the list price of one output token (a later copy of the row
 * with a larger output count is repriced for the extra output only); null when not list-priced.
 */
export interface RowPrice {
  costUsd: number | null;
  basis: 'engine-reported' | 'list-price' | null;
  priceKey: string | null;
  outputUnit: number | null;
}

/** Prices an entry; called once per entry, in order, as the store writes it. */
export type Pricer = (entry: LedgerEntry) => RowPrice;

/** A run nothing measured: reported as unknown ("Not included"), never as zero. Once per turn. */
export interface UnmeteredDrive {
  at: string;
  sessionId: string | null;
  workItem: string | null;
  turnId: number | null;
  engine: string | null;
  runner: string | null;
  reason: string;
}

export const GROUP_BY = ['day', 'engine', 'model', 'work-item', 'payer', 'session'] as const;
export type GroupBy = (typeof GROUP_BY)[number];

export interface ReportGroup {
  key: string;
  /** Ledger rows: requests for per-request meters, turns otherwise. */
  rows: number;
  turns: number;
  usage: Usage;
  /** Sum of the priced rows; null when no row of the group has a price. */
  costUsd: number | null;
  /** Rows without a price (unknown model): their tokens are counted, their cost is not. */
  unpricedRows: number;
  costBases: string[];
}

export interface UnmeteredGroup {
  engine: string | null;
  runner: string | null;
  reason: string;
  count: number;
  last: string;
}

export interface UsageReport {
  since: string;
  until: string;
  by: GroupBy;
  groups: ReportGroup[];
  total: ReportGroup;
  notIncluded: {
    unmetered: UnmeteredGroup[];
    unmeteredCount: number;
    unpricedModels: string[];
    unpricedRows: number;
  };
}

/**
 * What some ledger rows cost, for a page that shows a cost (the console): the priced rows' sum, and
 * how many rows it leaves out, so a partial sum says so and an unpriced one stays unknown.
 */
export interface CostFigure {
  /** Sum of the priced rows; null when no row is priced (unknown, never $0). */
  costUsd: number | null;
  rows: number;
  /** Rows without a price (unknown model): left out of `costUsd`. */
  unpricedRows: number;
  /** The priced rows' cost bases (`engine-reported`, `list-price`), sorted. */
  bases: string[];
}

/** A session's rows: all of them (rows between turns too), and each turn's, by turn id. */
export interface SessionCosts {
  total: CostFigure;
  /** Only the turns with rows: a turn absent here has none. */
  turns: Map<number, CostFigure>;
}

/**
 * One piece of a transcript import. Its entries are read one at a time as they are written, and
 * none is kept: an iterable may hand the same entry object again, filled with the next row.
 */
export interface ImportPiece {
  /** New rows; each counts when it is added (or corrects an existing row). */
  add: Iterable<LedgerEntry>;
  /** Later copies of rows already taken, with a larger output count (not counted as added). */
  correct: Iterable<LedgerEntry>;
  /** Source ids of imported transcript rows (no turn) to take out again: metered per turn after all. */
  remove: readonly string[];
}

/**
 * A transcript import in progress (`usage scan`): its pieces are written in one write transaction
 * the store commits about every `commitEveryMs` (a commit per piece doubled the insert time, one for
 * the whole import would keep the daemon from writing for that long). What is not committed when it
 * fails is dropped: the transcripts are read again next time, and nothing is counted twice.
 */
export interface LedgerImport {
  /** Returns the rows added or corrected by `add`, and how many removed rows this import had added. */
  write(piece: ImportPiece, price: Pricer): Promise<{ added: number; removedOwn: number }>;
  /** Commit what is pending if it was held `commitEveryMs` (or at once: `now`). */
  commit(now: boolean): Promise<void>;
  /** Commit, and end the import. */
  finish(): Promise<void>;
  /** Drop what is not committed, and end the import. */
  abort(): Promise<void>;
}

export interface LedgerStore {
  /**
   * Add rows, in one transaction: already-recorded (meter, source id) pairs are skipped, except that
   * a later copy with a larger output count corrects its row, and a row imported without a turn
   * gets the turn that records it. `settle`: the waiting drives with this reason of the rows' turns
   * go in the same transaction (the telemetry or the wire request they waited for arrived). Returns
   * how many rows were added or corrected.
   */
  add(entries: Iterable<LedgerEntry>, price: Pricer, settle?: string): Promise<number>;
  /** Record an unmetered drive (once per turn: a second one of the same turn is ignored). */
  recordUnmetered(drive: UnmeteredDrive): Promise<void>;
  /** Whether a turn has rows. */
  turnHasRows(turnId: number): Promise<boolean>;
  /** What a turn's rows add up to, with their models; undefined when it has none. */
  turnTotals(turnId: number): Promise<{ usage: Usage; model: string | null } | undefined>;
  /**
   * What each session's rows cost, by session id; a session with no rows is absent (its cost is
   * not the ledger's to say). Any number of ids: the store bounds each query itself.
   */
  sessionCosts(sessionIds: readonly string[]): Promise<Map<string, SessionCosts>>;
  /**
   * Totals from `since` (included) until `until` (excluded), grouped (in key order), with what they
   * leave out (the unmetered drives grouped by engine, runner and reason, the latest first).
   */
  report(filter: { since: Date; until: Date; by: GroupBy }): Promise<UsageReport>;
  /** Begin a transcript import (see LedgerImport). */
  beginImport(options: { commitEveryMs: number }): Promise<LedgerImport>;
  /**
   * Rows recorded without a price (a model the price table did not know then), priced now where
   * `price` can — cost, basis and price key together; rows it still cannot price stay unknown.
   * Returns how many were priced.
   */
  repriceUnknown(price: Pricer): Promise<number>;
}

/** `usage scan`'s cursors: how far each transcript file was read. */
export interface ScanCursor {
  path: string;
  inode: number;
  size: number;
  offset: number;
}

export interface ScanCursorStore {
  /** Every saved cursor, by path. */
  all(): Promise<Map<string, ScanCursor>>;
  /** Save cursors (one transaction, durable: they say the rows before them are in the ledger). */
  save(cursors: readonly ScanCursor[], at: string): Promise<void>;
}
