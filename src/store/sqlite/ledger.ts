import type Database from 'better-sqlite3';
import type { Usage } from '../../core/events.js';
import type {
  GroupBy,
  ImportPiece,
  LedgerEntry,
  LedgerImport,
  LedgerStore,
  Pricer,
  SessionCosts,
  UnmeteredDrive,
  UsageReport,
} from '../../core/ports/ledger.js';
import type { Db } from '../db.js';
import {
  type TurnTotalsRow,
  turnTotalsOf,
  UNPRICED_COLUMNS,
  type UnpricedRow,
  unpricedEntry,
} from '../ledger-rows.js';
import { sessionCosts } from './ledger-costs.js';
import { HourTally } from './ledger-hours.js';
import { LedgerWriter } from './ledger-insert.js';
import { usageReport } from './ledger-report.js';

/**
 * The usage ledger's tables (`usage_ledger`, `unmetered_drives`, and the hourly rollup `usage_hours`
 * with its `usage_hours_dirty` and `usage_hours_mark`, see ledger-hours.ts): their only reader and
 * writer. The session store records a lost turn's drive through `insertUnmeteredDrive` (in its own
 * transaction); the budgets read the sums through `ledgerSums`.
 */

type Statement = Database.Statement<unknown[]>;

const INSERT_DRIVE = `INSERT INTO unmetered_drives (at, session_id, work_item, turn_id, engine, runner, reason)
   VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (turn_id) DO NOTHING`;

/** A turn nothing measured, in the unmetered drives (once per turn). For the session store's transactions. */
export function insertUnmeteredDrive(db: Db, d: UnmeteredDrive): void {
  db.prepare(INSERT_DRIVE).run(d.at, d.sessionId, d.workItem, d.turnId, d.engine, d.runner, d.reason);
}

/** What a session's (or a work item's) rows add up to: all tokens, and the priced rows' dollars. */
export function ledgerSums(
  db: Db,
  scope: 'session' | 'work-item',
  key: string,
): { tokens: number; usd: number } {
  const column = scope === 'session' ? 'session_id' : 'work_item';
  return db
    .prepare(
      `SELECT COALESCE(SUM(input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens + reasoning_tokens), 0) AS tokens,
         COALESCE(SUM(cost_usd), 0) AS usd
       FROM usage_ledger WHERE ${column} = ?`,
    )
    .get(key) as { tokens: number; usd: number };
}

export class SqliteLedgerStore implements LedgerStore {
  private readonly writer: LedgerWriter;
  private readonly insertDrive: Statement;
  private readonly hasRows: Statement;
  private readonly settleDrive: Statement;

  constructor(
    private readonly db: Db,
    private readonly options: { now?: () => Date } = {},
  ) {
    this.writer = new LedgerWriter(db);
    this.insertDrive = db.prepare(INSERT_DRIVE);
    this.hasRows = db.prepare('SELECT 1 FROM usage_ledger WHERE turn_id = ? LIMIT 1').pluck();
    this.settleDrive = db.prepare('DELETE FROM unmetered_drives WHERE turn_id = ? AND reason = ?');
  }

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  async add(entries: Iterable<LedgerEntry>, price: Pricer, settle?: string): Promise<number> {
    const recordedAt = this.now();
    // IMMEDIATE: the rollup's tally reads before the first write, from the snapshot it then writes on.
    return this.db
      .transaction(() => {
        const turns = settle === undefined ? undefined : new Set<number>();
        const tally = new HourTally(this.db);
        const inserted = this.writer.write(entries, price, recordedAt, tally, { turns });
        tally.flush();
        for (const id of turns ?? []) this.settleDrive.run(id, settle);
        return inserted;
      })
      .immediate();
  }

  async recordUnmetered(d: UnmeteredDrive): Promise<void> {
    this.insertDrive.run(d.at, d.sessionId, d.workItem, d.turnId, d.engine, d.runner, d.reason);
  }

  async turnHasRows(turnId: number): Promise<boolean> {
    return this.hasRows.get(turnId) !== undefined;
  }

  async turnTotals(turnId: number): Promise<{ usage: Usage; model: string | null } | undefined> {
    const row = this.db
      .prepare(
        `SELECT COUNT(*) AS n, SUM(input_tokens) AS i, SUM(output_tokens) AS o, SUM(cache_read_tokens) AS cr,
           SUM(cache_creation_tokens) AS cc, SUM(reasoning_tokens) AS r, GROUP_CONCAT(DISTINCT model) AS models
         FROM usage_ledger WHERE turn_id = ?`,
      )
      .get(turnId) as TurnTotalsRow;
    return turnTotalsOf(row);
  }

  async sessionCosts(sessionIds: readonly string[]): Promise<Map<string, SessionCosts>> {
    return sessionCosts(this.db, sessionIds);
  }

  async report(filter: { since: Date; until: Date; by: GroupBy }): Promise<UsageReport> {
    // One read transaction, one snapshot: the hours it reads summed and the rows at its edges agree
    // even while another process writes.
    return this.db.transaction(() => usageReport(this.db, filter))();
  }

  async beginImport(options: { commitEveryMs: number }): Promise<LedgerImport> {
    return new SqliteLedgerImport(this.db, this.writer, options.commitEveryMs, () => this.now());
  }

  async repriceUnknown(price: Pricer): Promise<number> {
    // One row of each unpriced model first: the rows of a model that is still unknown (the common
    // case at every start) are never read.
    const samples = this.db
      .prepare(
        `SELECT ${UNPRICED_COLUMNS} FROM usage_ledger
         WHERE id IN (SELECT MIN(id) FROM usage_ledger WHERE cost_usd IS NULL AND model IS NOT NULL GROUP BY model)`,
      )
      .all() as UnpricedRow[];
    const known = samples.filter((r) => price(unpricedEntry(r)).costUsd !== null).map((r) => r.model);
    if (known.length === 0) return 0;
    const rowsOf = this.db.prepare(
      `SELECT ${UNPRICED_COLUMNS} FROM usage_ledger WHERE cost_usd IS NULL AND model = ?`,
    );
    // The ledger's update trigger marks each priced row's hour: its rollup is computed again.
    const update = this.db.prepare(
      'UPDATE usage_ledger SET cost_usd = ?, cost_basis = ?, price_key = ? WHERE id = ? AND cost_usd IS NULL',
    );
    let priced = 0;
    for (const model of known) {
      const rows = rowsOf.all(model) as UnpricedRow[];
      this.db
        .transaction(() => {
          const tally = new HourTally(this.db);
          for (const r of rows) {
            const p = price(unpricedEntry(r));
            if (p.costUsd !== null) priced += update.run(p.costUsd, p.basis, p.priceKey, r.id).changes;
          }
          tally.flush();
        })
        .immediate();
    }
    return priced;
  }
}

/**
 * The import's page cache (KiB): the rows go to the end of the table, but their keys (message ids)
 * are random, so each row lands on a random page of the unique index — a page not in the cache is
 * read back from the file, and one evicted dirty is written out before its commit. So the cache
 * grows with the rows written, about what their two indexes take with the pages' free space (~150
 * bytes a row), from `min` (the import's own pages: a small import stays small) up to `max`
 * (200,000 rows: a third of the reads and half the writes of a 4 MB cache).
 */
const IMPORT_CACHE_KIB = { min: 4000, max: 40_000, perRow: 150 };
/**
 * WAL pages between checkpoints during an import (the connection's own, usually 1000, is restored
 * after): each checkpoint reads back and copies every page of the log, and an import's commits
 * rewrite the same index pages — fewer checkpoints copy each page fewer times (200,000 rows: a
 * third fewer writes, half the reads).
 */
const IMPORT_CHECKPOINT_PAGES = 16_384;

/**
 * One write transaction across several pieces, committed about every `everyMs`: each commit writes
 * the index pages it touched again. For the import, on this connection: a page cache that starts
 * small and grows with the rows written (IMPORT_CACHE_KIB), not the connection's default; fewer
 * checkpoints (IMPORT_CHECKPOINT_PAGES); no fsync at each commit (WAL, synchronous NORMAL) —
 * imported rows can always be read again from the transcripts, and the cursors that say they were
 * read are committed last, with an fsync; and SQLite's CHECK constraints off (ignore_check_constraints):
 * the writer checks each row against them itself (LedgerWriter, `bulk`) — SQLite checks `payer_kind
 * IN (…4 kinds)` by building a temporary b-tree of the list for every row, a third of an imported
 * row's insert. All four are restored when the import ends; nothing else writes on this connection
 * meanwhile (the CLI's scan, the daemon's watcher with a connection of its own).
 */
class SqliteLedgerImport implements LedgerImport {
  private since = 0;
  private readonly started: string;
  private readonly unimport: Statement;
  private readonly restore: {
    cacheSize: number;
    synchronous: number;
    checkpoint: number;
    ignoreChecks: number;
  };
  private ended = false;
  private rows = 0;
  private cacheKib = IMPORT_CACHE_KIB.min;

  constructor(
    private readonly db: Db,
    private readonly writer: LedgerWriter,
    private readonly everyMs: number,
    private readonly now: () => string,
  ) {
    this.started = now();
    this.unimport = db.prepare(
      `DELETE FROM usage_ledger WHERE meter = 'transcript' AND source_id = ? AND turn_id IS NULL
       RETURNING recorded_at`,
    );
    this.restore = {
      cacheSize: Number(db.pragma('cache_size', { simple: true })),
      synchronous: Number(db.pragma('synchronous', { simple: true })),
      checkpoint: Number(db.pragma('wal_autocheckpoint', { simple: true })),
      ignoreChecks: Number(db.pragma('ignore_check_constraints', { simple: true })),
    };
    db.pragma(`cache_size = -${IMPORT_CACHE_KIB.min}`);
    db.pragma('synchronous = NORMAL');
    db.pragma(`wal_autocheckpoint = ${IMPORT_CHECKPOINT_PAGES}`);
    db.pragma('ignore_check_constraints = ON');
  }

  /** A cache about the size of the indexes written so far, within bounds (see IMPORT_CACHE_KIB). */
  private grow(added: number): void {
    this.rows += added;
    const want = Math.min(IMPORT_CACHE_KIB.max, Math.ceil((this.rows * IMPORT_CACHE_KIB.perRow) / 1024));
    if (want < this.cacheKib * 1.25) return;
    this.cacheKib = want;
    this.db.pragma(`cache_size = -${want}`);
  }

  async write(piece: ImportPiece, price: Pricer): Promise<{ added: number; removedOwn: number }> {
    // A piece that arrives after the import ended (a worker's, as a failed scan stops) writes nothing.
    if (this.ended) throw new Error('the transcript import has ended');
    if (!this.db.inTransaction) {
      this.db.exec('BEGIN IMMEDIATE');
      this.since = Date.now();
    }
    const recordedAt = this.now();
    const run = () => {
      const tally = new HourTally(this.db);
      const added = this.writer.write(piece.add, price, recordedAt, tally, { bulk: true });
      this.writer.write(piece.correct, price, recordedAt, tally, { bulk: true });
      this.grow(added);
      let removedOwn = 0;
      for (const sourceId of piece.remove) {
        const removed = this.unimport.get(sourceId) as { recorded_at: string } | undefined;
        if (removed && removed.recorded_at >= this.started) removedOwn += 1;
      }
      tally.flush();
      return { added, removedOwn };
    };
    // No savepoint per piece (it would first copy every page the piece touches to a sub-journal:
    // a seventh of the import's time): a piece that fails drops the whole uncommitted batch with it,
    // and the import ends — what is not committed is read again next time.
    try {
      return run();
    } catch (error) {
      await this.abort();
      throw error;
    }
  }

  async commit(now: boolean): Promise<void> {
    if (this.db.inTransaction && (now || Date.now() - this.since >= this.everyMs)) this.db.exec('COMMIT');
  }

  async finish(): Promise<void> {
    try {
      if (this.db.inTransaction) this.db.exec('COMMIT');
    } finally {
      await this.abort();
    }
  }

  async abort(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    if (this.db.inTransaction) this.db.exec('ROLLBACK');
    this.db.pragma(`cache_size = ${this.restore.cacheSize}`);
    this.db.pragma(`synchronous = ${this.restore.synchronous}`);
    this.db.pragma(`wal_autocheckpoint = ${this.restore.checkpoint}`);
    this.db.pragma(`ignore_check_constraints = ${this.restore.ignoreChecks}`);
  }
}
