import { LoopError } from '../core/errors.js';

/** The report's vocabulary lives with the ledger's port; `LedgerStore.report` computes it. */
export {
  GROUP_BY,
  type GroupBy,
  type ReportGroup,
  type UnmeteredGroup,
  type UsageReport,
} from '../core/ports/ledger.js';

/**
 * `7d`, `24h`, `30m`, `2w` (before `now`), or a date / date-time (`2026-11-30`, ISO 8601). A clear
 * usage error otherwise.
 */
export function parseWhen(text: string, now: Date, what: string): Date {
  const relative = /^(\d{1,6})([mhdw])$/.exec(text.trim());
  if (relative) {
    const n = Number(relative[1]);
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 }[
      relative[2] as 'm' | 'h' | 'd' | 'w'
    ];
    return new Date(now.getTime() - n * unit);
  }
  const date = /^(\d{4})-(\d{2})-(\d{2})(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$/.exec(text.trim());
  if (date) {
    const [month, dayOfMonth] = [Number(date[2]), Number(date[3])];
    const day = new Date(Date.UTC(Number(date[1]), month - 1, dayOfMonth));
    const at = new Date(text.trim());
    // `Date` rolls 2026-02-30 over to March 2: a day the month does not have is an error.
    if (!Number.isNaN(at.getTime()) && day.getUTCMonth() === month - 1 && day.getUTCDate() === dayOfMonth)
      return at;
  }
  throw new LoopError(
    'usage',
    `${what} takes a duration (7d, 24h, 30m, 2w) or a date (2026-11-30), not ${JSON.stringify(text)}`,
  );
}
