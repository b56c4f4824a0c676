import { compact } from '../../acts/context.js';
import type { ActDetail, ActKind, ClassifiedAct } from '../../acts/types.js';
import { LIMITS } from '../../acts/types.js';

/**
 * What the REST and GraphQL classifiers find in a GitHub API request: the acts it is, and what must
 * be looked up upstream (with the real token) before an act can be judged — the base branch of a
 * pull request named by number or node id, the default branch a contents write lands on, the
 * repository a node id belongs to. Pure.
 */

/**
 * GraphQL object types whose node id an act can name, and whose repository (and branch) we read;
 * `RepositoryNode`: any node that belongs to a repository (or is one), the target of an allowed
 * mutation (an issue, a pull request, a comment, a review, a review thread).
 */
export type NodeType =
  | 'PullRequest'
  | 'Ref'
  | 'Repository'
  | 'BranchProtectionRule'
  | 'RepositoryRuleset'
  | 'RepositoryNode';

export type Lookup =
  /** REST `GET /repos/o/r/pulls/N` → `base.ref`. */
  | { kind: 'pull'; number: string }
  /** REST `GET /repos/o/r` → `default_branch`. */
  | { kind: 'default-branch' }
  /** GraphQL `node(id:)` → its repository (and branch, for pull requests and refs). */
  | { kind: 'node'; id: string; type: NodeType };

export interface ApiAct extends ClassifiedAct {
  /** What names the act's target when the request does not. */
  lookup?: Lookup;
  /**
   * The repository the act reaches is not known from the request (a GraphQL node id): it must be
   * looked up and be the session's before the act may go.
   */
  repoUnverified?: boolean;
  /** GraphQL: where the act's result is in the response (batch entry, or null; the response key). */
  result?: { index: number | null; key: string };
}

/** The session's repository, as its work item names it. */
export interface SessionRepo {
  owner: string;
  repo: string;
}

/** GitHub owner and repository names are case-insensitive. */
export const isSessionRepo = (nameWithOwner: string, session: SessionRepo): boolean =>
  nameWithOwner.toLowerCase() === `${session.owner}/${session.repo}`.toLowerCase();

export const commandText = (text: string): string =>
  text.length > LIMITS.commandText ? `${text.slice(0, LIMITS.commandText - 1)}…` : text;

export function apiAct(
  kind: ActKind,
  command: string,
  detail: ActDetail,
  extra: Partial<ApiAct> = {},
): ApiAct {
  return { kind, command: commandText(command), detail: compact(detail), ...compact(extra) };
}

export type RefOp = 'update' | 'force' | 'delete';

/**
 * The act a ref write is, by its full name (`refs/heads/x`, `refs/tags/v1`): branches are pushes
 * (forced or not) and deletions; tags are tag pushes, and their deletion a branch-deletion act with
 * the tag named (as `git push --delete` of a tag is classified). Any other ref, or none, cannot be
 * placed, so it counts as reaching an unknown branch.
 */
export function refWrite(ref: string | undefined, op: RefOp): { kind: ActKind; detail: ActDetail } {
  const force = op === 'force' || undefined;
  if (ref?.startsWith('refs/tags/')) {
    const tag = ref.slice('refs/tags/'.length);
    if (op === 'delete') return { kind: 'git-delete-branch', detail: { ref, branches: [], tags: [tag] } };
    return { kind: 'git-push-tags', detail: { ref, tags: [tag], force } };
  }
  const kind: ActKind = op === 'delete' ? 'git-delete-branch' : force ? 'git-force-push' : 'git-push';
  if (ref?.startsWith('refs/heads/') && ref.length > 'refs/heads/'.length) {
    return { kind, detail: { ref, branches: [ref.slice('refs/heads/'.length)], force } };
  }
  return {
    kind,
    detail: { ref, refs: ref === undefined ? undefined : [ref], force, protectedUnknown: true },
  };
}

/** What a lookup found: the repository (`owner/name`), the branch, or the full ref name. */
export interface Found {
  repo?: string | undefined;
  branch?: string | undefined;
  ref?: string | undefined;
}

/**
 * The act once its lookup is answered: the branch (pull request base, default branch) or the ref
 * placed, the repository named. A ref can turn out to be a tag, which changes the act's kind.
 * Nothing found leaves the act as uncertain as it was.
 */
export function withFound(act: ApiAct, found: Found | undefined): ApiAct {
  if (!found) return act;
  const repo = found.repo ?? act.detail.repo;
  let next: ApiAct = { ...act, detail: compact({ ...act.detail, repo }) };
  if (found.repo !== undefined) delete next.repoUnverified;
  if (found.ref !== undefined) {
    const op: RefOp =
      act.kind === 'git-delete-branch' ? 'delete' : act.kind === 'git-force-push' ? 'force' : 'update';
    const placed = refWrite(found.ref, op);
    const { protectedUnknown: _, refs: __, ...rest } = next.detail;
    next = { ...next, kind: placed.kind, detail: compact({ ...rest, ...placed.detail }) };
  } else if (found.branch !== undefined) {
    const { protectedUnknown: _, ...rest } = next.detail;
    const target = act.kind === 'pr-merge' || act.kind === 'gh-api-merge' ? { into: found.branch } : {};
    const branches = 'into' in target ? rest.branches : [found.branch];
    next = { ...next, detail: compact({ ...rest, ...target, branches }) };
  }
  return next;
}

/** Whether the act's target branch is still unknown (a `deny-protected` rule needs it). */
export const branchUnknown = (act: ApiAct): boolean => act.detail.protectedUnknown === true;
