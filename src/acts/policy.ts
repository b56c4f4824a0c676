import type { ActRule, Policy } from './decide.js';
// The config's schema of a policy is in policy-schema.ts: this module loads no zod (a turn reads
// policies; only validating a config builds their schema).
import type { PolicyInput } from './policy-schema.js';
import type { ActKind } from './types.js';

export { type ActRule, decide, isProtected, type Policy, type Verdict } from './decide.js';
export type { PolicyInput };

/**
 * The merge policy of a repository: which branches are protected, and for each kind of act whether
 * the agent may do it — `allow`, `deny`, or `deny-protected` (denied when it reaches a protected
 * branch, or when where it goes cannot be known). Pure data and a pure decision; enforcement is the
 * PreToolUse hook (engines that have one) or a breach found in the turn's events (the others).
 */
export const ACT_RULES = ['allow', 'deny', 'deny-protected'] as const satisfies readonly ActRule[];

/** What an agent may do unless the config says otherwise: nothing that reaches a protected branch or the outside world. */
export const DEFAULT_ACT_RULES: Readonly<Record<ActKind, ActRule>> = {
  'git-push': 'deny-protected',
  'git-force-push': 'deny',
  'git-push-tags': 'deny',
  'git-delete-branch': 'deny-protected',
  'git-merge': 'deny-protected',
  'pr-merge': 'deny',
  'gh-api-merge': 'deny',
  'release-create': 'deny',
  'package-publish': 'deny',
  'git-reset-hard': 'deny-protected',
  'rm-rf-outside-workspace': 'deny',
  'write-outside-workspace': 'deny',
  'git-internals-write': 'deny',
  'repo-delete': 'deny',
  'protection-change': 'deny',
  'workflow-dispatch': 'deny',
  // Recorded, never ignored; not denied by default (an alias may be harmless, a denial would stop
  // ordinary work). Set them to deny for a stricter policy.
  'unknown-git-act': 'allow',
  'unknown-gh-act': 'allow',
  'dynamic-command': 'allow',
  'unreadable-input': 'allow',
  'truncated-input': 'allow',
};

/** The global policy with a repository's on top: rules merge per kind, protected branches replace. */
export function resolvePolicy(
  global: PolicyInput | undefined,
  repo: PolicyInput | undefined,
  defaultBranch: string,
): Policy {
  return {
    protectedBranches: repo?.protectedBranches ?? global?.protectedBranches ?? [defaultBranch],
    rules: { ...DEFAULT_ACT_RULES, ...global?.acts, ...repo?.acts },
  };
}
