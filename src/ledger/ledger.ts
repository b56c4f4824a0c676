import type { TurnEvent, Usage } from '../core/events.js';
import type {
  LedgerEntry,
  LedgerStore,
  Payer,
  Pricer,
  RowPrice,
  UnmeteredDrive,
} from '../core/ports/ledger.js';
import type { Meter } from '../core/ports/sessions.js';
import type { PriceTable, Rate } from './pricing.js';
import { addUsage, type TurnUsage } from './usage.js';

/**
 * The usage ledger (invariant 2): every metered request or turn as a row, with its cost basis and
 * payer, idempotent per (meter, source id); every run nothing measured as an unmetered drive. Costs
 * are estimates — `engine-reported` when the engine computed them, `list-price` when we did from the
 * price table — and a model missing from the table has `cost: null`, never 0. This is the service
 * the rest asks: it prices what it adds; the ledger's port (`LedgerStore`) keeps the rows.
 */
export type { LedgerEntry } from '../core/ports/ledger.js';

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

/** The reason of an OTLP-metered turn's drive while its telemetry has not arrived (removed when it does). */
export const NO_TELEMETRY_YET =
  'no telemetry from the engine by the end of the turn (removed when its OTLP export arrives)';

/** The reason of a wire-metered turn's drive while no model request of it has been seen. */
export const NO_WIRE_YET =
  'no model request of this turn reached the gateway by its end (removed when one is recorded)';

export class Ledger {
  constructor(
    /** Where the rows are kept (the ledger's port). */
    readonly store: LedgerStore,
    private readonly prices: PriceTable,
  ) {}

  /** Where list prices come from (the dataset and its date, the models the config prices), for reports. */
  get priceSources(): PriceTable['sources'] {
    return this.prices.sources;
  }

  /**
   * Load the price data now (~0.5 MB, tens of ms): a turn calls it once its engine has started, so
   * the load happens while the engine starts up, not when the turn's first row is priced.
   */
  warmPrices(): void {
    this.prices.warm();
  }

  /** What a turn's rows add up to (a wire-metered turn's own figures); undefined when it has none. */
  turnTotals(turnId: number): Promise<{ usage: Usage; model: string | null } | undefined> {
    return this.store.turnTotals(turnId);
  }

  /** Record a run nothing measured (once per turn), with why. */
  recordUnmetered(drive: UnmeteredDrive): Promise<void> {
    return this.store.recordUnmetered(drive);
  }

  /** Price an entry: the engine's figure if it gave one, else list price at its time, else unknown (null). */
  price(
    entry: Pick<LedgerEntry, 'usage' | 'model' | 'engineCostUsd'> &
      Partial<Pick<LedgerEntry, 'at' | 'meter'>>,
  ): {
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
    const rate = entry.model ? this.prices.lookup(entry.model, entry.at) : undefined;
    if (!rate) return { cost: null, basis: null, priceKey: null, warning: unpriced(entry.model) };
    return { cost: rate.cost(entry.usage, perRequest(entry.meter)), basis: 'list-price', priceKey: rate.key };
  }

  /**
   * A pricer for one write: the rate of each model is looked up by the table (which keeps what it
   * resolved), and nothing is allocated per row that the statement does not need: the price it
   * returns is read at once, and reused by the next call. Warnings are gathered in `warnings`.
   */
  pricer(warnings: Set<string>): Pricer {
    const row: RowPrice = { costUsd: null, basis: null, priceKey: null, outputUnit: null };
    const unknown = new Set<string | null>();
    return (e) => {
      if (typeof e.engineCostUsd === 'number') {
        const p = this.price(e);
        if (p.warning) warnings.add(p.warning);
        return { costUsd: p.cost, basis: p.basis, priceKey: p.priceKey, outputUnit: null };
      }
      const rate: Rate | undefined =
        e.model && !unknown.has(e.model) ? this.prices.lookup(e.model, e.at) : undefined;
      if (!rate) {
        unknown.add(e.model);
        warnings.add(unpriced(e.model));
        row.costUsd = null;
        row.basis = null;
        row.priceKey = null;
        row.outputUnit = null;
        return row;
      }
      const single = perRequest(e.meter);
      row.costUsd = rate.cost(e.usage, single);
      row.basis = 'list-price';
      row.priceKey = rate.key;
      row.outputUnit = rate.outputUnit(e.usage, single);
      return row;
    };
  }

  /**
   * Price the rows recorded without a price that the table knows now (after an upgrade of the price
   * data, or a model added under pricing: in the config). Returns how many were priced.
   */
  repriceUnknown(): Promise<number> {
    return this.store.repriceUnknown(this.pricer(new Set()));
  }

  /**
   * Add entries; already-recorded (meter, source id) pairs are skipped. Returns what was added.
   * `settle`: the entries' turns were waiting for this (NO_TELEMETRY_YET, NO_WIRE_YET): their
   * waiting drives go, in the same transaction.
   */
  async add(
    entries: Iterable<LedgerEntry>,
    settle?: string,
  ): Promise<{ inserted: number; warnings: string[] }> {
    const warnings = new Set<string>();
    const inserted = await this.store.add(entries, this.pricer(warnings), settle);
    return { inserted, warnings: [...warnings] };
  }

  /**
   * Record a finished turn: one row per request for per-request meters (transcripts), one row for
   * the turn otherwise; a turn nothing measured becomes an unmetered drive with the reason.
   */
  async recordTurn(
    turn: TurnContext,
    events: readonly TurnEvent[],
    turnUsage: TurnUsage,
    unmeteredReason: string,
  ): Promise<{ inserted: number; warnings: string[]; unmetered: boolean }> {
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
      if (await this.store.turnHasRows(turn.turnId)) return { inserted: 0, warnings: [], unmetered: false };
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
      await this.store.recordUnmetered({
        at: turn.endedAt,
        sessionId: turn.sessionId,
        workItem: turn.workItem,
        turnId: turn.turnId,
        engine: turn.engine,
        runner: turn.runner,
        reason: unmeteredReason,
      });
      return { inserted: 0, warnings: [], unmetered: true };
    }
    return { ...(await this.add(entries)), unmetered: false };
  }
}

function unpriced(model: string | null | undefined): string {
  return model
    ? `no list price for model ${model}: its cost is unknown (add it under pricing: in the config)`
    : 'the usage names no model: its cost is unknown';
}

/** Meters whose rows are single requests (a transcript line, an OTLP api_request, a request at the wire). */
function perRequest(meter: LedgerEntry['meter'] | undefined): boolean {
  return meter === 'transcript' || meter === 'otel' || meter === 'wire';
}
