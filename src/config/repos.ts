import { type Policy, resolvePolicy } from '../acts/policy.js';
import { parseWorkItem } from '../core/work-item.js';
import type { Config } from './schema.js';

/** A work item's repository in the config (GitHub compares names case-insensitively), if configured. */
export function repoOf(config: Config, workItem: string): Config['repos'][string] | undefined {
  const item = parseWorkItem(workItem);
  const key = Object.keys(config.repos).find(
    (k) => k.toLowerCase() === `${item.owner}/${item.repo}`.toLowerCase(),
  );
  return key === undefined ? undefined : config.repos[key];
}

/** The merge policy of a work item's repository (an unconfigured one gets the top-level policy). */
export function policyOf(config: Config, workItem: string): Policy {
  const repo = repoOf(config, workItem);
  return resolvePolicy(config.policy, repo?.policy, repo?.defaultBranch ?? 'main');
}
