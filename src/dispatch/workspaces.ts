import type { RoutedTurn } from '../core/ports/inbox.js';
import type { SessionRecord, SessionStore } from '../core/ports/sessions.js';
import { parseWorkItem, workItemSlug } from '../core/work-item.js';
import type { Logger } from '../log/logger.js';
import { isSessionHolding, type Runner } from '../runners/runner.js';
import type { GitRunner } from '../workspaces/git-runner.js';
import { ensureWorktree, removeWorktree, worktreeDir } from '../workspaces/worktree.js';

/**
 * Where the dispatcher runs a work item's turns (its repository, or its own git worktree) and what
 * closing a work item releases (the runner's session, the worktree). The composition root gives it
 * the config's repository lookup, the session store, the runners and the git runner.
 */
export interface WorkspaceDeps {
  dataDir: string;
  /** The work item's repository in the config, if configured. */
  repoOf(workItem: string): { path: string; workspace?: string | undefined } | undefined;
  store: Pick<SessionStore, 'list' | 'slugFor'>;
  runners: Readonly<Record<string, Runner>>;
  git: GitRunner;
  logger: Logger;
}

export interface Workspaces {
  /** The directory a routed turn runs in: the repository, or its work item's worktree (created). */
  workspace(route: RoutedTurn): Promise<string>;
  /** Release what a closed work item held: the note the close is stored with. */
  onClose(workItem: string, session: SessionRecord | undefined): Promise<string | undefined>;
}

export function dispatchWorkspaces(deps: WorkspaceDeps): Workspaces {
  return {
    workspace: async (route) => {
      if (route.workspace !== 'worktree') return route.repoPath;
      // The slug the new session will take: refused here when another work item holds it.
      return ensureWorktree(route.repoPath, deps.dataDir, await deps.store.slugFor(route.workItem), deps.git);
    },
    onClose: async (workItem, session) => {
      const runner = session ? deps.runners[session.runner] : undefined;
      const runnerNote =
        session && runner && isSessionHolding(runner) ? await runner.closeSession(session) : undefined;
      const wt = await worktreeOf(deps, workItem, session);
      if (!wt) return runnerNote;
      const result = await removeWorktree(wt.repoPath, wt.dir, deps.git);
      if (!result.removed)
        deps.logger.warn('worktree kept', { workItem, dir: wt.dir, reason: result.reason });
      return result.removed ? `worktree ${wt.dir} removed` : `worktree ${wt.dir} kept: ${result.reason}`;
    },
  };
}

/**
 * Where a work item's worktree lives follows from config and its sessions' stored slug (the latest
 * session's, when the work item has none active), so a restarted daemon still finds (and removes)
 * the worktrees an earlier one created, under slugs of any age.
 */
async function worktreeOf(
  deps: WorkspaceDeps,
  workItem: string,
  session: SessionRecord | undefined,
): Promise<{ repoPath: string; dir: string } | undefined> {
  const repo = deps.repoOf(workItem);
  if (repo?.workspace !== 'worktree') return undefined;
  const slug = (session ?? (await deps.store.list({ workItem, limit: 1 }))[0])?.slug;
  return {
    repoPath: repo.path,
    dir: worktreeDir(deps.dataDir, slug ?? workItemSlug(parseWorkItem(workItem))),
  };
}
