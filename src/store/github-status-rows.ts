import { LoopError } from '../core/errors.js';
import type { StatusPatch, StatusPhase, StatusRow } from '../core/ports/github-status.js';

/**
 * The `github_status` rows (migration 24) as both stores read and write them
 * (store/sqlite/github-status.ts, store/postgres/github-status.ts): the row, its record, and what a
 * patch stores — flags as 0/1, ids checked, the error scrubbed, then bounded.
 */

export interface StatusDbRow {
  delivery_id: string;
  work_item: string;
  reacted: number;
  comment_id: number | null;
  check_run_id: number | null;
  check_sha: string | null;
  phase: StatusPhase | null;
  digest: string | null;
  final: number;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

/** A stored error's length at most: enough for GitHub's message and status, never a whole page. */
export const MAX_ERROR_CHARS = 1000;

export function toStatusRow(r: StatusDbRow): StatusRow {
  return {
    deliveryId: r.delivery_id,
    workItem: r.work_item,
    reacted: Number(r.reacted) === 1,
    commentId: r.comment_id === null ? null : Number(r.comment_id),
    checkRunId: r.check_run_id === null ? null : Number(r.check_run_id),
    checkSha: r.check_sha,
    phase: r.phase,
    digest: r.digest,
    final: Number(r.final) === 1,
    lastError: r.last_error,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** A GitHub id as stored: a whole positive number both stores keep exactly (GitHub's pass 2^32). */
function githubId(name: string, value: number | null): number | null {
  if (value === null) return null;
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new LoopError(
      'internal',
      `${name} ${String(value)} is not a GitHub id (a whole number from 1 to 2^53)`,
    );
  return value;
}

/** At most `max` UTF-16 units, never ending in half a surrogate pair. */
function cut(value: string, max: number): string {
  const head = value.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(head) ? head.slice(0, -1) : head;
}

/** The patch's columns in a fixed order, each with its stored value; fields left out are not there. */
export function storedPatch(
  patch: StatusPatch,
  scrub: (text: string) => string,
  text: (value: string) => string = (value) => value,
): Array<[column: string, value: unknown]> {
  const maybe = (value: string | null) => (value === null ? null : text(value));
  const out: Array<[string, unknown]> = [];
  if (patch.reacted !== undefined) out.push(['reacted', patch.reacted ? 1 : 0]);
  if (patch.commentId !== undefined) out.push(['comment_id', githubId('commentId', patch.commentId)]);
  if (patch.checkRunId !== undefined) out.push(['check_run_id', githubId('checkRunId', patch.checkRunId)]);
  if (patch.checkSha !== undefined) out.push(['check_sha', maybe(patch.checkSha)]);
  if (patch.phase !== undefined) out.push(['phase', patch.phase]);
  if (patch.digest !== undefined) out.push(['digest', maybe(patch.digest)]);
  if (patch.final !== undefined) out.push(['final', patch.final ? 1 : 0]);
  // Scrubbed before the cut: a cut first could leave half a secret unmasked.
  if (patch.lastError !== undefined)
    out.push([
      'last_error',
      patch.lastError === null ? null : text(cut(scrub(patch.lastError), MAX_ERROR_CHARS)),
    ]);
  return out;
}

export function notInInbox(deliveryId: string): LoopError {
  return new LoopError(
    'store-failed',
    `delivery ${deliveryId} is not in the inbox: what GitHub was told about it cannot be tracked`,
  );
}
