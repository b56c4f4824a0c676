import type { RoutedTurn } from '../core/ports/inbox.js';
import { formatWorkItem, parseWorkItem, workItemSlug } from '../core/work-item.js';

/**
 * What a manual delivery (`the-loop run`) carries in its body (validated when a stored one is read:
 * manualBodySchema in reroute.ts). No zod here: `the-loop run` plans its delivery before its engine starts.
 */
export interface ManualBody {
  workItem: string;
  prompt: string;
  engine?: string | undefined;
  runner?: string | undefined;
  cwd?: string | undefined;
}

/**
 * The plan of a manual delivery, made when `the-loop run` queues it (and stored with it, as a
 * webhook's route is): a turn on the work item with the prompt as given. '' leaves engine, runner and
 * directory to the session or the defaults.
 */
export function manualPlan(body: ManualBody): RoutedTurn {
  const item = parseWorkItem(body.workItem);
  return {
    action: 'deliver',
    workItem: formatWorkItem(item),
    repo: `${item.owner}/${item.repo}`,
    prompt: body.prompt,
    engine: body.engine ?? '',
    runner: body.runner ?? '',
    repoPath: body.cwd ?? '',
    workspace: 'checkout',
    author: 'local',
    trigger: `manual (${workItemSlug(item)})`,
  };
}
