import type { Usage } from '../core/events.js';
import type { TurnGuard, TurnRecord } from '../core/ports/sessions.js';
import { formatInt, stripControls } from '../core/text.js';
import { totalTokens } from '../ledger/usage.js';

export { formatInt } from '../core/text.js';

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  const rest = Math.round(s % 60);
  if (m < 60) return `${m} min ${rest} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function formatTokens(usage: Usage | null): string {
  if (!usage) return 'unmetered';
  const parts = [`${formatInt(usage.inputTokens)} in`, `${formatInt(usage.outputTokens)} out`];
  if (usage.cacheReadTokens) parts.push(`${formatInt(usage.cacheReadTokens)} cache read`);
  if (usage.cacheCreationTokens) parts.push(`${formatInt(usage.cacheCreationTokens)} cache write`);
  if (usage.reasoningTokens) parts.push(`${formatInt(usage.reasoningTokens)} reasoning`);
  return `${formatInt(totalTokens(usage))} tokens (${parts.join(', ')})`;
}

/**
 * An estimated amount in USD: cents below one dollar-cent (`~0.21¢`), so nothing real ever reads
 * like `$0.00` — that string means nothing was measured, and the product never prints it.
 */
export function formatUsd(usd: number): string {
  if (usd === 0) return '~0¢';
  if (usd < 0.000001) return '<0.0001¢';
  if (usd < 0.01) return `~${(usd * 100).toFixed(usd < 0.0001 ? 4 : 2)}¢`;
  return usd < 1 ? `~$${usd.toFixed(4)}` : `~$${usd.toFixed(2)}`;
}

/**
 * A turn's tokens and cost, as one phrase: a turn that reported no tokens at all (a turn that failed
 * before the model answered) is "no usage" — never `0 tokens · ~0¢`.
 */
export function formatTurnUsage(turn: Pick<TurnRecord, 'usage' | 'costUsd' | 'meter'>): string {
  if (turn.usage !== null && totalTokens(turn.usage) === 0 && !turn.costUsd) return 'no usage';
  return `${formatTokens(turn.usage)} · ${formatCost(turn)}`;
}

/** Cost is never shown as $0 for something nothing measured: unknown says so. */
export function formatCost(turn: Pick<TurnRecord, 'usage' | 'costUsd' | 'meter'>): string {
  if (turn.costUsd !== null) return `${formatUsd(turn.costUsd)} (engine-reported estimate)`;
  if (turn.usage === null)
    return turn.meter === 'none' ? 'cost unknown (unmetered engine)' : 'cost unknown (no usage reported)';
  return 'cost unknown (not priced yet)';
}

export function turnDurationMs(turn: Pick<TurnRecord, 'startedAt' | 'endedAt'>): number | null {
  if (!turn.endedAt) return null;
  return Date.parse(turn.endedAt) - Date.parse(turn.startedAt);
}

/**
 * What `stripControls` removes or acts on (and newlines and tabs): a cell without any is printed as it
 * is, without its five replacements — a table of a thousand rows has nine thousand cells.
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

const tableCell = (cell: string): string =>
  UNSAFE.test(cell) ? stripControls(cell).replace(/[\n\t]+/g, ' ') : cell;

/**
 * A plain aligned table; no colours so it pipes cleanly. Cells lose their control characters first,
 * so the widths are those of what is printed (and a cell cannot break its row).
 */
export function table(headers: string[], given: string[][]): string {
  const rows = given.map((row) => row.map(tableCell));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}

export { oneLine, toJson } from '../core/text.js';

/** What a turn's engine ran under, in one line: sandbox, gateway, permission mode, credentials by kind. */
export function formatGuard(guard: TurnGuard | null): string {
  if (!guard) return 'not recorded';
  const parts = [
    guard.sandbox === 'bwrap' ? 'sandbox bwrap' : 'NO sandbox',
    guard.gateway.model || guard.gateway.github
      ? `gateway (${[guard.gateway.model ? 'model API' : '', guard.gateway.github ? 'git + GitHub' : ''].filter(Boolean).join(', ')})`
      : 'no gateway',
    `permissions ${guard.permissions}`,
  ];
  for (const c of guard.credentials) {
    const where = c.held === 'gateway' ? 'held by the gateway' : "in the engine's environment";
    parts.push(`${c.name}: ${c.kind}${c.env ? ` (${c.env})` : ''} ${where}`);
  }
  return parts.join(' · ');
}
