import type { SessionRecord, SessionStatus, TurnRecord } from '../core/ports/sessions.js';
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

/**
 * A session as `sessions list` prints it: the fields of its record it shows, and its turns in the
 * figures it shows — `tokens` is the total of its metered turns (null when none was metered), what
 * `totalTokens(summarizeTurns(turns).usage)` gives.
 */
export interface SessionListing
  extends Pick<
      SessionRecord,
      'id' | 'workItem' | 'engine' | 'runner' | 'tmuxTarget' | 'status' | 'hold' | 'waiting' | 'takeover'
    >,
    Pick<SessionSummary, 'turns' | 'running' | 'lastTurnAt'> {
  tokens: number | null;
}

/**
 * A store that lists sessions in figures without reading their turns (the SQLite store: one query
 * over both tables). `sessions list` uses it when the store has it; `--json`, which prints whole
 * records and summaries, reads the sessions and their turns.
 */
export interface SessionLister {
  listings(filter: { workItem?: string; status?: SessionStatus; limit?: number }): Promise<SessionListing[]>;
}
