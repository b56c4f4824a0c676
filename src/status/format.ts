import { formatInt } from '../core/text.js';

/**
 * Figures as a tracking comment shows them: durations, token counts, dollars. Fixed formats, never
 * the host's locale (a comment reads the same whichever machine wrote it). Pure.
 */

/** "45 s", "2 min 10 s", "1 h 3 min"; under a second: "under 1 s". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return 'unknown time';
  const totalS = Math.floor(ms / 1000);
  if (totalS < 1) return 'under 1 s';
  if (totalS < 60) return `${totalS} s`;
  const totalMin = Math.floor(totalS / 60);
  if (totalMin < 60) {
    const s = totalS % 60;
    return s === 0 ? `${totalMin} min` : `${totalMin} min ${s} s`;
  }
  const h = Math.floor(totalMin / 60);
  const min = totalMin % 60;
  return min === 0 ? `${h} h` : `${h} h ${min} min`;
}

/** A count with `,` between thousands (1234567 → "1,234,567"), as the CLI writes it; rounded. */
export function formatCount(n: number): string {
  return Number.isFinite(n) ? formatInt(Math.round(n)) : 'unknown';
}

/**
 * Dollars with enough digits that a nonzero figure never reads as zero: "$12.34", "$0.0123",
 * "<$0.0001"; a priced zero is "~0¢", as the CLI says it: `$0` reads as "nothing measured", and the
 * product never writes it. Undefined for a figure that is not one (negative, NaN): "unknown".
 */
export function formatUsd(usd: number): string | undefined {
  if (!Number.isFinite(usd) || usd < 0) return undefined;
  if (usd === 0) return '~0¢';
  if (usd < 0.0001) return '<$0.0001';
  if (usd < 1) return `$${usd.toFixed(4)}`;
  const cents = Math.round(usd * 100);
  return `$${formatCount(Math.floor(cents / 100))}.${String(cents % 100).padStart(2, '0')}`;
}
