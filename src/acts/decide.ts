import { isProtected } from './context.js';
import type { ActKind, ClassifiedAct } from './types.js';

/**
 * The policy's decision on one act. Pure and free of dependencies: the PreToolUse hook process
 * loads this module (and the classifier) for every tool call, so it must load fast.
 */
export type ActRule = 'allow' | 'deny' | 'deny-protected';

/** A repository's effective policy. */
export interface Policy {
  protectedBranches: string[];
  rules: Record<ActKind, ActRule>;
}

export interface Verdict {
  verdict: 'allow' | 'deny';
  /** The rule that decided, e.g. `git-push: deny-protected`. */
  rule: string;
  /** For a denial: what the agent is told. */
  reason?: string;
}

/** Whether `branch` is protected: the classifier's matching (`*` patterns, unicode look-alikes folded). */
export { isProtected };

/** The policy's decision on one act. */
export function decide(act: ClassifiedAct, policy: Policy): Verdict {
  const rule: ActRule = policy.rules[act.kind] ?? 'allow';
  const label = `${act.kind}: ${rule}`;
  if (rule === 'allow') return { verdict: 'allow', rule: label };
  if (rule === 'deny') {
    return {
      verdict: 'deny',
      rule: label,
      reason: `${describeKind(act.kind)} is not allowed in this repository`,
    };
  }
  const d = act.detail;
  const reached = [...(d.branches ?? []), ...(d.into ? [d.into] : [])].filter((b) =>
    isProtected(b, policy.protectedBranches),
  );
  if (d.protected === true || reached.length > 0) {
    const which = reached.length > 0 ? reached.join(', ') : policy.protectedBranches.join(', ');
    return {
      verdict: 'deny',
      rule: label,
      reason: `${describeKind(act.kind)} to the protected branch ${which} is not allowed in this repository`,
    };
  }
  if (d.protectedUnknown === true || d.allBranches === true) {
    return {
      verdict: 'deny',
      rule: label,
      reason: `${describeKind(act.kind)} without a named branch is not allowed here (it may reach the protected branch ${policy.protectedBranches.join(', ')}): name the branch`,
    };
  }
  return { verdict: 'allow', rule: label };
}

const KIND_WORDS: Partial<Record<ActKind, string>> = {
  'git-push': 'pushing',
  'git-force-push': 'force-pushing',
  'git-push-tags': 'pushing tags',
  'git-delete-branch': 'deleting a branch',
  'git-merge': 'merging',
  'pr-merge': 'merging a pull request',
  'gh-api-merge': 'merging through the GitHub API',
  'release-create': 'creating a release',
  'package-publish': 'publishing a package',
  'git-reset-hard': 'git reset --hard',
  'rm-rf-outside-workspace': 'deleting files outside the workspace',
  'write-outside-workspace': 'writing outside the workspace',
  'git-internals-write': 'writing into .git',
  'repo-delete': 'deleting the repository',
  'protection-change': 'changing branch protection',
  'workflow-dispatch': 'starting a workflow',
};

const describeKind = (kind: ActKind): string => KIND_WORDS[kind] ?? kind;
