import { z } from 'zod';
import type { ActRule, Policy } from './decide.js';
import { ACT_KINDS, type ActKind } from './types.js';

export { type ActRule, decide, isProtected, type Policy, type Verdict } from './decide.js';

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

const branchPattern = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[^\s\0]+$/, 'a branch name or a pattern with *, without spaces');

export const policySchema = z
  .object({
    protectedBranches: z
      .array(branchPattern)
      .max(100)
      .optional()
      .describe(
        "Branches (a * matches any run of characters) no agent may push, merge, reset or delete on. Default: the repository's defaultBranch.",
      ),
    acts: z
      .partialRecord(z.enum(ACT_KINDS), z.enum(ACT_RULES))
      .optional()
      .describe(
        `Per kind of act: allow, deny, or deny-protected (denied on a protected branch). Kinds: ${ACT_KINDS.join(', ')}.`,
      ),
  })
  .strict();

export type PolicyInput = z.output<typeof policySchema>;

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
