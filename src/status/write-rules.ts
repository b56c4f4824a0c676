import { createHash } from 'node:crypto';
import type { CommitStatusInput } from '../core/ports/github.js';
import type { RenderedStatus, StatusFacts } from '../core/status-facts.js';

/** Which phases are the last thing said about a delivery. */
export const isFinal = (phase: StatusFacts['phase']) => phase === 'finished' || phase === 'rejected';

/**
 * Whether the check (run or commit status) needs writing: when its state, conclusion or title
 * changed since the last write (its summary alone is not worth an edit), and always for the final
 * one. Pure.
 */
export function checkWrite(
  rendered: RenderedStatus,
  facts: StatusFacts,
  last: string | undefined,
): { digest: string } | undefined {
  const c = rendered.check;
  const digest = createHash('sha256')
    .update(JSON.stringify([c.status, c.conclusion ?? null, c.title, isFinal(facts.phase) ? c.summary : '']))
    .digest('hex');
  return digest === last ? undefined : { digest };
}

/** A commit status (token mode) from the rendered check: pending until it is completed. */
export function commitStatusOf(
  rendered: RenderedStatus,
  context: string,
  targetUrl: string | undefined,
): CommitStatusInput {
  const c = rendered.check;
  const state: CommitStatusInput['state'] =
    c.status !== 'completed'
      ? 'pending'
      : c.conclusion === 'success' || c.conclusion === 'neutral'
        ? 'success'
        : c.conclusion === 'failure' || c.conclusion === 'timed_out'
          ? 'failure'
          : c.conclusion === 'action_required'
            ? 'pending'
            : 'error';
  return { state, context, description: c.description.slice(0, 140), targetUrl };
}
