/**
 * Figures as the console shows them, in step with the CLI (src/cli/format.ts, src/cli/usage.ts):
 * a cost nothing measured or priced is "unknown", never "$0".
 */
import type { ReportGroup } from '../../src/core/ports/ledger.js';

export function formatInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** Tokens; null (nothing metered) is unknown. */
export function formatTokens(n: number | null): string {
  return n === null ? 'unknown' : formatInt(n);
}

/** An estimated cost; null is unknown. The `~` says estimate (the CLI's form). */
export function formatUsd(usd: number | null): string {
  if (usd === null) return 'unknown';
  if (usd === 0) return '~0¢';
  if (usd < 0.000001) return '<0.0001¢';
  if (usd < 0.01) return `~${(usd * 100).toFixed(usd < 0.0001 ? 4 : 2)}¢`;
  return usd < 1 ? `~$${usd.toFixed(4)}` : `~$${usd.toFixed(2)}`;
}

/**
 * A session's or a turn's cost from the ledger: null is "unknown"; a sum that leaves unpriced rows
 * out says so ("~$0.4200 + unknown (3 unpriced)"), so a partial figure never reads as the whole.
 * `basis` (a turn's: `list-price`…) follows the figure it qualifies.
 */
export function formatCost(costUsd: number | null, unpricedRows: number, basis?: string | null): string {
  if (costUsd === null) return 'unknown';
  const dollars =
    basis === undefined ? formatUsd(costUsd) : `${formatUsd(costUsd)} (${basis ?? 'basis unknown'})`;
  return unpricedRows > 0 ? `${dollars} + unknown (${formatInt(unpricedRows)} unpriced)` : dollars;
}

/** A group's cost: its priced rows, plus "unknown" when some rows have no price (as `the-loop usage`). */
export function formatGroupCost(g: Pick<ReportGroup, 'costUsd' | 'unpricedRows' | 'rows'>): string {
  if (g.rows === 0) return '-';
  if (g.costUsd === null) return 'unknown';
  const dollars = formatUsd(g.costUsd);
  return g.unpricedRows > 0 ? `${dollars} + unknown` : dollars;
}

/** `2025-01-02 03:04 UTC`: the daemon's timestamps are ISO in UTC; shown in UTC, as the CLI does. */
export function formatDate(iso: string | null): string {
  if (!iso) return '-';
  return `${iso.slice(0, 16).replace('T', ' ')} UTC`;
}

/** `5 min ago` style, for how long a session has been taken over. */
export function formatAgo(iso: string, now = Date.now()): string {
  const ms = now - Date.parse(iso);
  if (!Number.isFinite(ms)) return iso;
  const minutes = Math.max(0, Math.floor(ms / 60_000));
  if (minutes < 1) return 'just now';
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours} h ago` : `${Math.floor(hours / 24)} days ago`;
}

/** One line of untrusted text, bounded (a whole error can be shown in a details element). */
export function oneLine(text: string, max = 200): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
