import { LoopError } from './errors.js';

/** A GitHub issue or pull request: `github:<owner>/<repo>#<n>`. */
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
  return { owner, repo, number };
}

export const formatWorkItem = (item: WorkItem): string => `github:${item.owner}/${item.repo}#${item.number}`;

/** `github-<owner>-<repo>-<n>`, lower-case, `[a-z0-9-]` only: safe as a tmux target and a path part. */
export function workItemSlug(item: WorkItem): string {
  const clean = (part: string) =>
    part
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '');
  return ['github', clean(item.owner), clean(item.repo), String(item.number)].filter(Boolean).join('-');
}
