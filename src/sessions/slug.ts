import { LoopError } from '../core/errors.js';
import { parseWorkItem, workItemKey, workItemSlug } from '../core/work-item.js';

/** A session's work item (canonical) and slug, as the registry holds them. */
export interface SlugUse {
  workItem: string;
  slug: string;
}

/** A slug another work item holds: refused, never shared (two work items, one worktree). */
export function slugCollision(slug: string, workItem: string, holder: string): LoopError {
  return new LoopError(
    'slug-collision',
    `the slug ${slug} of ${workItem} already belongs to ${holder}: refusing to share its worktree, tmux session and state directory`,
    {
      hint: `Two work items should never share a slug (a slug carries a digest of its work item): please report it with both work items. Nothing of ${workItem} was started, and ${holder} is untouched; ${workItem} stays refused while any session of ${holder} (closed ones included) is in the registry.`,
    },
  );
}

/**
 * The slug a new session of `workItem` takes, from the sessions that used its slugs (`uses`, newest
 * first: every session of the work item, and every session holding one of their slugs or the work
 * item's own slug). Pure.
 *
 * The slug of the work item's latest session is kept while no other work item holds it: a work item
 * keeps its worktree, branch and state directory across sessions, sessions made before slugs had a
 * digest included. Otherwise the work item's own slug (`workItemSlug`) — refused when another work
 * item holds it.
 */
export function planSlug(workItem: string, uses: readonly SlugUse[]): string {
  const key = workItemKey(workItem);
  // Stored work items are canonical; lower-casing again also covers a row written before they were.
  const mine = (u: SlugUse) => u.workItem.toLowerCase() === key;
  const holders = (slug: string) => uses.filter((u) => u.slug === slug && !mine(u)).map((u) => u.workItem);
  const previous = uses.find(mine);
  if (previous && holders(previous.slug).length === 0) return previous.slug;
  const own = workItemSlug(parseWorkItem(key));
  const holder = holders(own)[0];
  if (holder !== undefined) throw slugCollision(own, key, holder);
  return own;
}
