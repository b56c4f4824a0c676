import { createHash } from 'node:crypto';
import { LoopError } from './errors.js';

/**
 * A GitHub issue or pull request: `github:<owner>/<repo>#<n>`. GitHub compares owner and repository
 * names without regard to letter case, so a work item is held in one canonical case (lower): parsed
 * and formatted work items are canonical, and their text is the work item's key everywhere (the
 * registry, the inbox, the ledger, the dispatcher's FIFOs).
 */
export interface WorkItem {
  owner: string;
  repo: string;
  number: number;
}

// GitHub's own rules: owners are alphanumerics and single hyphens (max 39); repo names are
// alphanumerics, '-', '_' and '.', but never '.' or '..' (which would be path tricks).
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
const REPO = /^[A-Za-z0-9._-]{1,100}$/;
const REF = /^github:([^/#\s]+)\/([^/#\s]+)#(\d{1,9})$/;

export function parseWorkItem(text: string): WorkItem {
  const match = REF.exec(text.trim());
  const hint = 'Write a work item as github:<owner>/<repo>#<number>, e.g. github:octo/widgets#15.';
  if (!match) throw new LoopError('work-item-invalid', `not a work item: ${JSON.stringify(text)}`, { hint });
  const [, owner = '', repo = '', num = ''] = match;
  if (!OWNER.test(owner)) {
    throw new LoopError('work-item-invalid', `invalid GitHub owner ${JSON.stringify(owner)}`, { hint });
  }
  if (!REPO.test(repo) || repo === '.' || repo === '..') {
    throw new LoopError('work-item-invalid', `invalid GitHub repository name ${JSON.stringify(repo)}`, {
      hint,
    });
  }
  const number = Number(num);
  if (!Number.isSafeInteger(number) || number < 1) {
    throw new LoopError('work-item-invalid', `invalid issue/PR number ${JSON.stringify(num)}`, { hint });
  }
  return canonicalWorkItem({ owner, repo, number });
}

/** The one canonical form of a work item: owner and repository in lower case. */
export function canonicalWorkItem(item: WorkItem): WorkItem {
  return { owner: item.owner.toLowerCase(), repo: item.repo.toLowerCase(), number: item.number };
}

/** A repository's `owner/name` (or a config key naming one) in its canonical case, for comparing. */
export const canonicalRepository = (fullName: string): string => fullName.toLowerCase();

/** The canonical text of a work item: the same for every letter case GitHub may send. */
export function formatWorkItem(item: WorkItem): string {
  const { owner, repo, number } = canonicalWorkItem(item);
  return `github:${owner}/${repo}#${number}`;
}

/** The key a work item's text is looked up by: validated and canonical (`Octo/A#1` → `octo/a#1`). */
export const workItemKey = (text: string): string => formatWorkItem(parseWorkItem(text));

/** How much of `<owner>-<repo>` a slug keeps to be readable; the digest keeps it unique. */
const SLUG_NAME_CHARS = 32;
/** 40 bits of SHA-256: two work items with the same readable part share a slug with odds of 2^-40. */
const SLUG_DIGEST_HEX = 10;

/**
 * `github-<owner>-<repo>-<n>-<digest>`, `[a-z0-9-]` only and at most 60 characters: safe as a tmux
 * target (`loop-<slug>`), a path part and a branch name. The readable part alone is not unique
 * (`octo/a-b`, `octo/a_b`, `octo-a/b` and `octo/a.b` all read `octo-a-b`); the digest of the
 * canonical work item is, so each work item has its own worktree, tmux session and state directory.
 * The registry still refuses a slug another work item holds (a digest collision, or a session
 * created before slugs had a digest): see `sessions/slug.ts`.
 */
export function workItemSlug(item: WorkItem): string {
  const clean = (part: string) =>
    part
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '');
  const name = clean(`${clean(item.owner)}-${clean(item.repo)}`)
    .slice(0, SLUG_NAME_CHARS)
    .replace(/-+$/, '');
  const digest = createHash('sha256').update(formatWorkItem(item)).digest('hex').slice(0, SLUG_DIGEST_HEX);
  return ['github', name, clean(String(item.number)), digest].filter(Boolean).join('-');
}
