import type { TurnEvent, Usage } from '../core/events.js';
import type { Meter } from '../core/ports/sessions.js';
import type { Db } from '../store/db.js';
import type { Payer } from './payer.js';
import { listPriceCost, type ModelPrice, type PriceTable } from './pricing.js';
import { addUsage, type TurnUsage } from './usage.js';

/**
 * The usage ledger (invariant 2): every metered request or turn as a row, with its cost basis and
 * payer, idempotent per (meter, source id); every run nothing measured as an unmetered drive. Costs
 * are estimates — `engine-reported` when the engine computed them, `list-price` when we did from the
 * price table — and a model missing from the table has `cost: null`, never 0.
 */
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

export interface TurnContext {
  sessionId: string;
  workItem: string;
  turnId: number;
  engine: string;
  runner: string;
  meter: Meter;
  endedAt: string;
  payer: Payer;
}

/** How a model is priced in one `add` call (looked up once per model). */
interface ModelPricing {
  basis: 'engine-reported' | 'list-price' | null;
  priceKey: string | null;
  warning?: string | undefined;
  /** The list price of one output token (to reprice a later, larger output count). */
  outputUnit: number | null;
  price?: ModelPrice | undefined;
}

/** The reason of an OTLP-metered turn's drive while its telemetry has not arrived (removed when it does). */
export const NO_TELEMETRY_YET =
  'no telemetry from the engine by the end of the turn (removed when its OTLP export arrives)';

/** The reason of a wire-metered turn's drive while no model request of it has been seen. */
export const NO_WIRE_YET =
  'no model request of this turn reached the gateway by its end (removed when one is recorded)';

export class Ledger {
  private readonly insert;
  private readonly insertDrive;
  private readonly turnHasRows;
  private readonly settleDrive;

  constructor(
    readonly db: Db,
    private readonly prices: PriceTable,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.insert = db.prepare(
      `INSERT INTO usage_ledger (meter, source_id, at, session_id, work_item, turn_id, engine, runner, model,
         input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
         cost_usd, cost_basis, price_key, payer_kind, payer_id, recorded_at, partial)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (meter, source_id) DO UPDATE SET
         -- Claude Code writes a message once per content block while it streams: early copies can
         -- carry a placeholder output count; the largest one seen is the message's.
         output_tokens = MAX(output_tokens, excluded.output_tokens),
         -- Repriced for the extra output only (the last parameter: the list price of one output
         -- token), so the first record's input figures keep their cost.
         cost_usd = CASE WHEN excluded.output_tokens <= output_tokens THEN cost_usd
           WHEN cost_basis = 'list-price' AND ? IS NOT NULL
             THEN cost_usd + (excluded.output_tokens - output_tokens) * ?
           ELSE excluded.cost_usd END,
         -- A row imported by a scan first gets its turn when the turn records it.
         turn_id = COALESCE(turn_id, excluded.turn_id),
         session_id = COALESCE(session_id, excluded.session_id),
         work_item = COALESCE(work_item, excluded.work_item)
       WHERE excluded.output_tokens > output_tokens OR (turn_id IS NULL AND excluded.turn_id IS NOT NULL)`,
    );
    this.insertDrive = db.prepare(
      `INSERT INTO unmetered_drives (at, session_id, work_item, turn_id, engine, runner, reason)
       VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (turn_id) DO NOTHING`,
    );
    this.turnHasRows = db.prepare('SELECT 1 FROM usage_ledger WHERE turn_id = ? LIMIT 1').pluck();
    this.settleDrive = db.prepare('DELETE FROM unmetered_drives WHERE turn_id = ? AND reason = ?');
  }

  /** Telemetry arrived for these turns: they are metered after all (their waiting drives go). */
  telemetryArrived(turnIds: Iterable<number>): void {
    for (const id of new Set(turnIds)) this.settleDrive.run(id, NO_TELEMETRY_YET);
  }

  /**
   * What a turn's rows add up to (a wire-metered turn's own figures: every response the gateway
   * saw, side requests included); undefined when it has none.
   */
  turnTotals(turnId: number): { usage: Usage; model: string | null } | undefined {
    const row = this.db
      .prepare(
        `SELECT COUNT(*) AS n, SUM(input_tokens) AS i, SUM(output_tokens) AS o, SUM(cache_read_tokens) AS cr,
           SUM(cache_creation_tokens) AS cc, SUM(reasoning_tokens) AS r, GROUP_CONCAT(DISTINCT model) AS models
         FROM usage_ledger WHERE turn_id = ?`,
      )
      .get(turnId) as {
      n: number;
      i: number;
      o: number;
      cr: number;
      cc: number;
      r: number;
      models: string | null;
    };
    if (row.n === 0) return undefined;
    return {
      usage: {
        inputTokens: row.i,
        outputTokens: row.o,
        cacheReadTokens: row.cr,
        cacheCreationTokens: row.cc,
        reasoningTokens: row.r,
      },
      model: row.models,
    };
  }

  /** A model request of these turns went through the gateway: they are metered (waiting drives go). */
  wireArrived(turnIds: Iterable<number>): void {
    for (const id of new Set(turnIds)) this.settleDrive.run(id, NO_WIRE_YET);
  }

  /** Price an entry: the engine's figure if it gave one, else list price, else unknown (null). */
  price(entry: Pick<LedgerEntry, 'usage' | 'model' | 'engineCostUsd'>): {
    cost: number | null;
    basis: 'engine-reported' | 'list-price' | null;
    priceKey: string | null;
    warning?: string;
  } {
    // A negative (or non-finite) figure is not a cost: treated as no engine figure.
    if (
      typeof entry.engineCostUsd === 'number' &&
      Number.isFinite(entry.engineCostUsd) &&
      entry.engineCostUsd >= 0
    ) {
      return { cost: entry.engineCostUsd, basis: 'engine-reported', priceKey: null };
    }
    const found = entry.model ? this.prices.lookup(entry.model) : undefined;
    if (!found) {
      return {
        cost: null,
        basis: null,
        priceKey: null,
        warning: entry.model
          ? `no list price for model ${entry.model}: its cost is unknown (add it under pricing: in the config)`
          : 'the usage names no model: its cost is unknown',
      };
    }
    return {
      cost: listPriceCost(entry.usage, found.price),
      basis: 'list-price',
      priceKey: `${found.key}@${found.price.asOf}`,
    };
  }

  /** Add entries; already-recorded (meter, source id) pairs are skipped. Returns what was added. */
  add(entries: Iterable<LedgerEntry>): { inserted: number; warnings: string[] } {
    const warnings = new Set<string>();
    let inserted = 0;
    const recordedAt = this.now().toISOString();
    // One price lookup per model, not per row (an import brings hundreds of thousands of rows, and
    // nothing is allocated per row that the statement does not need).
    const models = new Map<string | null, ModelPricing>();
    this.db.transaction(() => {
      for (const e of entries) {
        let priced: ModelPricing;
        let cost: number | null = null;
        if (typeof e.engineCostUsd === 'number') {
          const p = this.price(e);
          priced = { basis: p.basis, priceKey: p.priceKey, warning: p.warning, outputUnit: null };
          cost = p.cost;
        } else {
          let found = models.get(e.model);
          if (!found) {
            const p = this.price({ model: e.model, usage: e.usage });
            const price = e.model ? this.prices.lookup(e.model)?.price : undefined;
            found = {
              basis: p.basis,
              priceKey: p.priceKey,
              warning: p.warning,
              outputUnit: price ? price.output / 1_000_000 : null,
              price,
            };
            models.set(e.model, found);
          }
          priced = found;
          cost = found.price ? listPriceCost(e.usage, found.price) : null;
        }
        if (priced.warning) warnings.add(priced.warning);
        const u = e.usage;
        // Counts new rows, and rows a later copy corrected.
        const { outputUnit } = priced;
        // Positional parameters, in the statement's order (binding an object per row costs a
        // sixth of a large import).
        inserted += this.insert.run(
          e.meter,
          e.sourceId,
          e.at,
          e.sessionId,
          e.workItem,
          e.turnId,
          e.engine,
          e.runner,
          e.model,
          u.inputTokens,
          u.outputTokens,
          u.cacheReadTokens,
          u.cacheCreationTokens,
          u.reasoningTokens,
          cost,
          priced.basis,
          priced.priceKey,
          e.payer.kind,
          e.payer.id,
          recordedAt,
          e.partial ? 1 : 0,
          outputUnit,
          outputUnit,
        ).changes;
      }
    })();
    return { inserted, warnings: [...warnings] };
  }

  /**
   * Record a finished turn: one row per request for per-request meters (transcripts), one row for
   * the turn otherwise; a turn nothing measured becomes an unmetered drive with the reason.
   */
  recordTurn(
    turn: TurnContext,
    events: readonly TurnEvent[],
    turnUsage: TurnUsage,
    unmeteredReason: string,
  ): { inserted: number; warnings: string[]; unmetered: boolean } {
    const base = {
      sessionId: turn.sessionId,
      workItem: turn.workItem,
      turnId: turn.turnId,
      engine: turn.engine,
      runner: turn.runner,
      payer: turn.payer,
    };
    const entries: LedgerEntry[] = [];
    if (turn.meter === 'otel' || turn.meter === 'wire') {
      // The OTLP receiver or the gateway writes this turn's rows as they come. None yet: an
      // unmetered drive until they do (a turn nothing measured stays unknown, never $0).
      if (this.turnHasRows.get(turn.turnId)) return { inserted: 0, warnings: [], unmetered: false };
      unmeteredReason = turn.meter === 'otel' ? NO_TELEMETRY_YET : NO_WIRE_YET;
    } else if (turn.meter === 'transcript') {
      // One row per request: a request's later events (the rest of an output first counted with a
      // placeholder) add up into its row.
      const bySource = new Map<string, LedgerEntry>();
      let n = 0;
      for (const event of events) {
        if (event.type !== 'usage') continue;
        n += 1;
        const sourceId = event.sourceId ?? `turn:${turn.turnId}:${n}`;
        const earlier = bySource.get(sourceId);
        if (earlier) {
          earlier.usage = addUsage(earlier.usage, event.usage);
          if (event.outputTotal !== undefined && event.outputTotal > earlier.usage.outputTokens)
            earlier.usage.outputTokens = event.outputTotal;
          continue;
        }
        // A correction whose request was counted in an earlier turn: its row gets the total (the
        // ledger keeps the largest output of a source id), never the difference.
        const usage =
          event.outputTotal !== undefined && event.outputTotal > event.usage.outputTokens
            ? { ...event.usage, outputTokens: event.outputTotal }
            : event.usage;
        const entry: LedgerEntry = {
          ...base,
          meter: 'transcript',
          sourceId,
          at: event.at ?? turn.endedAt,
          model: event.model ?? null,
          usage,
          engineCostUsd: event.costUsd,
        };
        bySource.set(sourceId, entry);
        entries.push(entry);
      }
    } else if (turn.meter !== 'none' && turnUsage.usage) {
      entries.push({
        ...base,
        meter: turn.meter,
        sourceId: `turn:${turn.turnId}`,
        at: turn.endedAt,
        model: turnUsage.model,
        usage: turnUsage.usage,
        engineCostUsd: turnUsage.costUsd,
      });
    }
    if (entries.length === 0) {
      this.insertDrive.run(
        turn.endedAt,
        turn.sessionId,
        turn.workItem,
        turn.turnId,
        turn.engine,
        turn.runner,
        unmeteredReason,
      );
      return { inserted: 0, warnings: [], unmetered: true };
    }
    return { ...this.add(entries), unmetered: false };
  }
}
