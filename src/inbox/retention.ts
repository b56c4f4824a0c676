import type { DeliveryStatus } from '../core/ports/inbox.js';

/**
 * Statuses whose work is over. A queued delivery (held ones included: a hold is a note on a queued
 * row) and a running one still need their body; these do not, except to retry a failed one.
 */
export const FINISHED_STATUSES = [
  'done',
  'failed',
  'rejected',
  'ignored',
] as const satisfies readonly DeliveryStatus[];

/** `inbox.retainDays: 0` keeps every body. */
export const KEEP_FOREVER = 0;

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The instant (ISO 8601, as the inbox stores times) before which a finished delivery's body may go;
 * undefined when bodies are kept forever.
 */
export function retentionCutoff(now: Date, retainDays: number): string | undefined {
  if (!Number.isInteger(retainDays) || retainDays < 0) {
    throw new RangeError(`retainDays is a whole number of days ≥ 0, not ${retainDays}`);
  }
  if (retainDays === KEEP_FOREVER) return undefined;
  return new Date(now.getTime() - retainDays * DAY_MS).toISOString();
}

export interface RetentionCandidate {
  status: DeliveryStatus;
  receivedAt: string;
  updatedAt: string;
  prunedAt: string | null;
}

/**
 * Whether a delivery's body may be dropped: its work is over, it is not pruned yet, and it both
 * arrived and last changed before the cutoff — so a failed delivery keeps its body for the whole
 * retention period after it failed, not only after it arrived. Times compare as ISO strings (UTC,
 * fixed width), as the inbox writes them.
 */
export function isPrunable(d: RetentionCandidate, cutoff: string): boolean {
  return (
    d.prunedAt === null &&
    (FINISHED_STATUSES as readonly string[]).includes(d.status) &&
    d.receivedAt < cutoff &&
    d.updatedAt < cutoff
  );
}
