import type { TurnEvent, Usage } from '../core/events.js';

const KINDS = [
  'inputTokens',
  'outputTokens',
  'cacheReadTokens',
  'cacheCreationTokens',
  'reasoningTokens',
] as const;

export const addUsage = (a: Usage, b: Usage): Usage => {
  const sum = Object.fromEntries(KINDS.map((k) => [k, a[k] + b[k]])) as unknown as Usage;
  // The 1-hour part of the cache writes (a subset of cacheCreationTokens): kept only where it was said.
  if (a.cacheCreation1hTokens || b.cacheCreation1hTokens)
    sum.cacheCreation1hTokens = (a.cacheCreation1hTokens ?? 0) + (b.cacheCreation1hTokens ?? 0);
  return sum;
};

export const totalTokens = (u: Usage): number => KINDS.reduce((sum, k) => sum + u[k], 0);

export interface TurnUsage {
  /** null when the turn reported nothing: shown as unknown, never as zero. */
  usage: Usage | null;
  model: string | null;
  costUsd: number | null;
  /** For `thread` engines: the running total to remember for the next turn. */
  nextBaseline: Usage | null;
  warnings: string[];
}

/**
 * The turn's own usage from the usage events it produced. Pure.
 * - `turn` scope: the events are this turn's figures; several are summed.
 * - `thread` scope: the last event is the engine session's running total; the turn used the
 *   difference from the previous turn's total (`baseline`). A total that went down (the engine
 *   started a new thread) is taken whole, with a warning.
 */
export function turnUsageFrom(
  events: readonly TurnEvent[],
  scope: 'turn' | 'thread',
  baseline: Usage | null,
): TurnUsage {
  const reports = events.filter((e): e is Extract<TurnEvent, { type: 'usage' }> => e.type === 'usage');
  const warnings: string[] = [];
  if (reports.length === 0) return { usage: null, model: null, costUsd: null, nextBaseline: null, warnings };
  const models = [...new Set(reports.map((r) => r.model).filter((m): m is string => Boolean(m)))];
  const model = models.length > 0 ? models.join(',') : null;
  if (scope === 'turn') {
    const usage = reports.map((r) => r.usage).reduce(addUsage);
    const costs = reports.map((r) => r.costUsd).filter((c): c is number => typeof c === 'number');
    const costUsd = costs.length === reports.length ? costs.reduce((a, b) => a + b, 0) : null;
    return { usage, model, costUsd, nextBaseline: null, warnings };
  }
  const total = (reports.at(-1) as (typeof reports)[number]).usage;
  if (!baseline) return { usage: total, model, costUsd: null, nextBaseline: total, warnings };
  const went_down = KINDS.some((k) => total[k] < baseline[k]);
  if (went_down) {
    warnings.push('the engine reported a running total lower than the previous turn; counted it whole');
    return { usage: total, model, costUsd: null, nextBaseline: total, warnings };
  }
  const usage = Object.fromEntries(KINDS.map((k) => [k, total[k] - baseline[k]])) as unknown as Usage;
  return { usage, model, costUsd: null, nextBaseline: total, warnings };
}
