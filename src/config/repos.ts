import { type Policy, resolvePolicy } from '../acts/policy.js';
import { LoopError } from '../core/errors.js';
import { canonicalRepository, parseWorkItem } from '../core/work-item.js';
import type { Config } from './schema.js';

/** A work item's repository in the config (GitHub compares names case-insensitively), if configured. */
export function repoOf(config: Config, workItem: string): Config['repos'][string] | undefined {
  const item = parseWorkItem(workItem);
  const name = canonicalRepository(`${item.owner}/${item.repo}`);
  const key = Object.keys(config.repos).find((k) => canonicalRepository(k) === name);
  return key === undefined ? undefined : config.repos[key];
}

/**
 * Two `repos:` keys that differ only in letter case name one repository on GitHub: which of them
 * an event meets would be a matter of key order, so the config is refused.
 */
export function checkRepoKeys(repos: Config['repos'], where: string): void {
  const seen = new Map<string, string>();
  for (const key of Object.keys(repos)) {
    const first = seen.get(canonicalRepository(key));
    if (first !== undefined) {
      throw new LoopError(
        'config-invalid',
        `${where}: repos: ${first} and ${key} name the same repository (GitHub ignores letter case)`,
        { hint: 'Keep one of the two keys.' },
      );
    }
    seen.set(canonicalRepository(key), key);
  }
}

/** The merge policy of a work item's repository (an unconfigured one gets the top-level policy). */
export function policyOf(config: Config, workItem: string): Policy {
  const repo = repoOf(config, workItem);
  return resolvePolicy(config.policy, repo?.policy, repo?.defaultBranch ?? 'main');
}
