/**
 * What has been said on GitHub about each delivery that runs a turn (issue 18): its reaction, its
 * tracking comment, its check run or commit status, and the last state written. Durable, so that a
 * restart edits the same comment (a crash's "running" is finished by the next daemon) instead of
 * adding one. Owned by one table (`github_status`).
 */

/** The last state written to GitHub. */
export type StatusPhase = 'queued' | 'running' | 'held' | 'finished';

export interface StatusRow {
  deliveryId: string;
  workItem: string;
  /** The eyes reaction is done (or was given up on: it is never retried). */
  reacted: boolean;
  /** The tracking comment (null: not created yet). */
  commentId: number | null;
  /** App mode: the check run on the pull request's head. */
  checkRunId: number | null;
  /** The head commit the check run or commit status is on. */
  checkSha: string | null;
  /** The last phase written (null: nothing written yet). */
  phase: StatusPhase | null;
  /** sha256 (hex) of the last comment body written: an identical edit is skipped. */
  digest: string | null;
  /** The finished state is on GitHub (or was given up on): nothing more to write. */
  final: boolean;
  /** The last failure talking to GitHub, for the log and `events show` (null: none). */
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
}

export type StatusPatch = Partial<
  Pick<
    StatusRow,
    'reacted' | 'commentId' | 'checkRunId' | 'checkSha' | 'phase' | 'digest' | 'final' | 'lastError'
  >
>;

export interface StatusStore {
  get(deliveryId: string): Promise<StatusRow | undefined>;
  /** Start tracking a delivery (idempotent: an existing row is returned as it is). */
  track(deliveryId: string, workItem: string): Promise<StatusRow>;
  /** Write these fields (an unknown delivery: nothing happens). */
  update(deliveryId: string, patch: StatusPatch): Promise<void>;
  /** Rows not final, oldest first (a restart finishes them), at most `limit`. */
  unfinished(limit: number): Promise<StatusRow[]>;
}
