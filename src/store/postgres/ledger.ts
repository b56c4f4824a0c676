import type { Usage } from '../../core/events.js';
import type {
  GroupBy,
  LedgerEntry,
  LedgerImport,
  LedgerStore,
  Pricer,
  SessionCosts,
  UnmeteredDrive,
  UsageReport,
} from '../../core/ports/ledger.js';
import {
  type TurnTotalsRow,
  turnTotalsOf,
  UNPRICED_COLUMNS,
  type UnpricedRow,
  unpricedEntry,
} from '../ledger-rows.js';
import { PgLedgerImport } from './ledger-import.js';
import { sessionCosts, usageReport } from './ledger-report.js';
import { insertUnmeteredDrive } from './ledger-shared.js';
import { ROWS_PER_STATEMENT, rowsOf, writeRows } from './ledger-write.js';
import type { Pg } from './pg.js';

/**
 * The usage ledger on PostgreSQL (`usage_ledger`, `unmetered_drives`): their only reader and writer.
 * The session store records a lost turn's drive through `insertUnmeteredDrive` (in its own
 * transaction); the budgets read the sums through `ledgerSums` (ledger-shared.ts). Rows are written
 * in batches (ledger-write.ts), imports on a connection of their own (ledger-import.ts), reports
 * grouped from the rows themselves (ledger-report.ts: there is no hourly rollup here).
 *
 * Several hosts at once: every write is safe against another's. A row's (meter, source id) is unique
 * (ON CONFLICT), a correction locks its rows, a drive is once per turn (its unique turn), repricing
 * changes only rows still unpriced, and a report reads one snapshot.
 */
export class PgLedgerStore implements LedgerStore {
  constructor(
    private readonly db: Pg,
    private readonly options: { now?: () => Date } = {},
  ) {}

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  async add(entries: Iterable<LedgerEntry>, price: Pricer, settle?: string): Promise<number> {
    const recordedAt = this.now();
    const turns = settle === undefined ? undefined : new Set<number>();
    // Priced once, in order, before the transaction (which may be run again).
    const rows = rowsOf(entries, price, turns);
    if (rows.length === 0 && (turns?.size ?? 0) === 0) return 0;
    return this.db.tx(async (q) => {
      const written = await writeRows(q, rows, recordedAt);
      if (turns && turns.size > 0)
        await q.run('DELETE FROM unmetered_drives WHERE turn_id = ANY($1::bigint[]) AND reason = $2', [
          [...turns],
          settle,
        ]);
      return written;
    });
  }

  async recordUnmetered(d: UnmeteredDrive): Promise<void> {
    await insertUnmeteredDrive(this.db, d);
  }

  async turnHasRows(turnId: number): Promise<boolean> {
    return (
      (await this.db.row('SELECT 1 FROM usage_ledger WHERE turn_id = $1 LIMIT 1', [turnId])) !== undefined
    );
  }

  async turnTotals(turnId: number): Promise<{ usage: Usage; model: string | null } | undefined> {
    // The models as SQLite's GROUP_CONCAT(DISTINCT) gives them: each once, in the order of its first row.
    const row = await this.db.row<TurnTotalsRow>(
      `SELECT COUNT(*) AS n, SUM(input_tokens) AS i, SUM(output_tokens) AS o, SUM(cache_read_tokens) AS cr,
         SUM(cache_creation_tokens) AS cc, SUM(reasoning_tokens) AS r,
         (SELECT string_agg(model, ',' ORDER BY first) FROM (SELECT model, MIN(id) AS first FROM usage_ledger
            WHERE turn_id = $1 AND model IS NOT NULL GROUP BY model) AS m) AS models
       FROM usage_ledger WHERE turn_id = $1`,
      [turnId],
    );
    return turnTotalsOf(row);
  }

  async sessionCosts(sessionIds: readonly string[]): Promise<Map<string, SessionCosts>> {
    if (sessionIds.length === 0) return new Map();
    return sessionCosts(this.db, sessionIds);
  }

  async report(filter: { since: Date; until: Date; by: GroupBy }): Promise<UsageReport> {
    // One snapshot for all its queries: the groups, the turns and the drives agree while others write.
    return this.db.tx((q) => usageReport(q, filter), 'repeatable read');
  }

  async beginImport(options: { commitEveryMs: number }): Promise<LedgerImport> {
    return new PgLedgerImport(this.db, options.commitEveryMs, () => this.now());
  }

  async repriceUnknown(price: Pricer): Promise<number> {
    // One row of each unpriced model first: the rows of a model that is still unknown (the common
    // case at every start) are never read.
    const samples = await this.db.rows<UnpricedRow>(
      `SELECT ${UNPRICED_COLUMNS} FROM usage_ledger
       WHERE id IN (SELECT MIN(id) FROM usage_ledger WHERE cost_usd IS NULL AND model IS NOT NULL GROUP BY model)`,
    );
    const known = samples.filter((r) => price(unpricedEntry(r)).costUsd !== null).map((r) => r.model);
    let priced = 0;
    for (const model of known) {
      const rows = await this.db.rows<UnpricedRow>(
        `SELECT ${UNPRICED_COLUMNS} FROM usage_ledger WHERE cost_usd IS NULL AND model = $1 ORDER BY id`,
        [model],
      );
      const updates: {
        id: number;
        cost: number;
        basis: string | null;
        key: string | null;
        output: number;
        input: number;
      }[] = [];
      for (const r of rows) {
        const p = price(unpricedEntry(r));
        if (p.costUsd !== null && !Number.isNaN(p.costUsd))
          updates.push({
            id: r.id,
            cost: p.costUsd,
            basis: p.basis,
            key: p.priceKey,
            output: r.output_tokens,
            input: r.input_tokens,
          });
      }
      // Only rows still unpriced, and still as they were read (a correction that raised a row's
      // counts meanwhile leaves it for the next reprice): another host repricing at once prices
      // each row once, at its current counts.
      for (let i = 0; i < updates.length; i += ROWS_PER_STATEMENT) {
        const chunk = updates.slice(i, i + ROWS_PER_STATEMENT);
        priced += await this.db.run(
          `UPDATE usage_ledger AS l SET cost_usd = x.cost, cost_basis = x.basis, price_key = x.key
           FROM unnest($1::bigint[], $2::float8[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
             AS x (id, cost, basis, key, output, input)
           WHERE l.id = x.id AND l.cost_usd IS NULL AND l.output_tokens = x.output AND l.input_tokens = x.input`,
          [
            chunk.map((u) => u.id),
            chunk.map((u) => u.cost),
            chunk.map((u) => u.basis),
            chunk.map((u) => u.key),
            chunk.map((u) => u.output),
            chunk.map((u) => u.input),
          ],
        );
      }
    }
    return priced;
  }
}
