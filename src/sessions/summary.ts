import type { TurnRecord } from '../core/ports/sessions.js';
import { addUsage } from '../ledger/usage.js';

/** A session's turns in figures: what `sessions list` and the console's rows show. */
export interface SessionSummary {
  turns: number;
  running: boolean;
  lastTurnAt: string | null;
  /** The sum of its metered turns; null when no turn was metered (never zero-filled). */
  usage: TurnRecord['usage'];
  /** Finished turns nothing measured: their usage and cost are unknown, and left out of the sums. */
  unmeteredTurns: number;
  /** The sum of its priced turns; null when none has a cost (unknown, never $0). */
  costUsd: number | null;
}

export function summarizeTurns(turns: readonly TurnRecord[]): SessionSummary {
  const metered = turns.filter((t) => t.usage !== null);
  const usage = metered.length
    ? metered.map((t) => t.usage as NonNullable<TurnRecord['usage']>).reduce(addUsage)
    : null;
  const costs = turns.filter((t) => t.costUsd !== null);
  return {
    turns: turns.length,
    running: turns.some((t) => t.status === 'running'),
    lastTurnAt: turns.at(-1)?.startedAt ?? null,
    usage,
    unmeteredTurns: turns.filter((t) => t.usage === null && t.status !== 'running').length,
    costUsd: costs.length ? costs.reduce((sum, t) => sum + (t.costUsd ?? 0), 0) : null,
  };
}
