/**
 * What a tracking comment (and a check run) says about one delivery, as plain data: the tracker
 * gathers it from the stores, `renderStatus` (pure) turns it into Markdown. Every string here may
 * hold outside or engine text: the renderer escapes, scrubs and bounds it.
 */

export interface TodoItem {
  text: string;
  status: 'pending' | 'in_progress' | 'completed';
}

export interface ActLine {
  /** push, force-push, merge, branch-delete, release, publish… */
  kind: string;
  /** What it was about: the ref, the pull request, the package (outside text). */
  target: string;
  /** The commit a push left the ref at, when known. */
  sha: string | undefined;
  outcome: 'succeeded' | 'failed' | 'blocked' | 'unknown';
  /** Why it was blocked (the policy rule), when it was. */
  rule: string | undefined;
}

export interface CostLine {
  /** Tokens in all (input + output + cache), null when nothing was measured. */
  tokens: number | null;
  /** Estimated cost, null when unknown (never shown as $0). */
  usd: number | null;
  /** Where the figure comes from: `engine-reported`, `list-price`, or why it is unknown (`unmetered`, `no price for <model>`). */
  basis: string;
  /** Rows left out of `usd` for want of a price. */
  unpricedRows: number;
}

export type StatusFacts = {
  workItem: string;
  deliveryId: string;
  /** Where to see the session (the console's page), or undefined when no public console URL is set. */
  consoleUrl: string | undefined;
  sessionId: string | undefined;
  now: string;
} & (
  | {
      phase: 'queued';
      /** The delivery ahead of it in its work item's line, and its turn when running. */
      behind: { deliveryId: string; turnSeq: number | undefined; running: boolean } | undefined;
      /** How many deliveries are ahead of it in line. */
      position: number;
      /** Why an earlier run of it stopped before it finished (a daemon shutdown or crash): it runs again. */
      interrupted?: string | undefined;
    }
  | {
      phase: 'held';
      /** Why its session is held (over budget, a breach, waiting for a person, interrupted…). */
      reason: string;
      /** What releases it: the command or button a person uses. */
      release: string;
    }
  | {
      phase: 'running';
      turnSeq: number;
      startedAt: string;
      elapsedMs: number;
      engine: string;
      todos: TodoItem[];
      acts: ActLine[];
    }
  | {
      phase: 'finished';
      /** succeeded, failed, interrupted… and the end reason (`result`, `exit`, `backstop`, `cancel`, `interrupted`). */
      outcome: 'succeeded' | 'failed' | 'cancelled' | 'interrupted' | 'not-run';
      endReason: string | undefined;
      /** What went wrong (the turn's error, or why the delivery failed before a turn), outside text. */
      error: string | undefined;
      turnSeq: number | undefined;
      durationMs: number | undefined;
      engine: string | undefined;
      cost: CostLine;
      todos: TodoItem[];
      acts: ActLine[];
      /** What happens next: "runs again" (a shutdown put it back in line), or nothing. */
      next: string | undefined;
    }
  | {
      phase: 'rejected';
      reason: string;
    }
);

/** A rendered status: the comment body, and the check's fields for a pull request. */
export interface RenderedStatus {
  /** Markdown, within GitHub's 65,536-character limit, ending in the hidden marker. */
  body: string;
  check: {
    status: 'queued' | 'in_progress' | 'completed';
    conclusion: 'success' | 'failure' | 'neutral' | 'cancelled' | 'timed_out' | 'action_required' | undefined;
    title: string;
    summary: string;
    /** A commit status's one line (≤ 140 characters). */
    description: string;
  };
}

/** The hidden marker every comment we write ends with: a comment carrying it is never a trigger. */
export { STATUS_MARKER_PREFIX } from './ports/github.js';
