import { createHash } from 'node:crypto';
import { GitHubCallError, type GitHubWrites, type RepoRef } from '../core/ports/github.js';
import type { StatusPatch, StatusRow } from '../core/ports/github-status.js';
import type { AnswerTarget } from '../core/ports/inbox.js';
import type { RenderedStatus, StatusFacts } from '../core/status-facts.js';
import type { Logger } from '../log/logger.js';
import { checkWrite, commitStatusOf } from './write-rules.js';

/**
 * The tracker's writes to GitHub, one part each: the reaction, the tracking comment, the check.
 * Each records what it wrote (or why it could not) in the row's patch; a refusal that will not
 * change (403, 404, 410) is not tried again for the delivery, a 5xx or a network failure throws
 * (the tracker backs off and tries again).
 */
export interface SayDeps {
  github: GitHubWrites;
  /**
   * Saves what a create returned at once (the comment's, the check run's id): a failure later in the
   * same refresh must not leave it unsaved, or the next try would create a second one.
   */
  keep(deliveryId: string, patch: StatusPatch): Promise<void>;
  settings: { checkName: string };
  logger: Logger;
  now: () => number;
}

/** What the tracker keeps of a delivery between its writes. */
export interface SayState {
  lastWrite: number;
  commentRefused: boolean;
  checkDigest: string | undefined;
}

const PERMANENT = new Set([401, 403, 404, 410]);

/** A refusal that asking again will not change (a rate limit kept up is not one: it passes). */
const refusedForGood = (error: unknown): boolean => {
  const status = statusOf(error);
  return status !== undefined && PERMANENT.has(status) && !isRateLimited(error);
};

const isRateLimited = (error: unknown) => error instanceof GitHubCallError && error.rateLimited;

export async function sayReaction(
  deps: SayDeps,
  id: string,
  repo: RepoRef,
  answer: AnswerTarget,
  patch: StatusPatch,
): Promise<void> {
  if (!answer.react) return;
  try {
    await deps.github.react(repo, answer.react, 'eyes');
  } catch (error) {
    // Never tried again: a deleted comment stays deleted, and a late reaction says nothing.
    patch.lastError = `reaction: ${describe(error)}`;
    deps.logger.warn('GitHub status: could not react to the trigger (deleted, or no permission?)', {
      delivery: id,
      status: statusOf(error),
      error: describe(error),
    });
  }
}

export async function sayComment(
  deps: SayDeps,
  id: string,
  final: boolean,
  e: SayState,
  repo: RepoRef,
  answer: AnswerTarget,
  row: StatusRow,
  rendered: RenderedStatus,
  patch: StatusPatch,
): Promise<void> {
  const digest = createHash('sha256').update(rendered.body).digest('hex');
  if (row.commentId !== null && digest === row.digest) return;
  const { github, logger } = deps;
  try {
    const create = async () => {
      patch.commentId = (await github.createComment(repo, answer.number, rendered.body)).id;
      await deps.keep(id, { commentId: patch.commentId });
    };
    if (row.commentId === null) await create();
    else {
      try {
        await github.updateComment(repo, row.commentId, rendered.body);
      } catch (error) {
        // A 404 of the comment itself (not of a token that could not be minted: that is no edit).
        if (statusOf(error) !== 404 || !/\/issues\/comments\//.test(describe(error))) throw error;
        logger.warn('GitHub status: the tracking comment was deleted; writing a new one', { delivery: id });
        await create();
      }
    }
    patch.digest = digest;
    e.lastWrite = deps.now();
  } catch (error) {
    const status = statusOf(error);
    patch.lastError = `comment: ${describe(error)}`;
    if (refusedForGood(error)) {
      e.commentRefused = true;
      logger.warn('GitHub status: GitHub refused the tracking comment; no more comments for this delivery', {
        delivery: id,
        status,
        error: describe(error),
        hint: status === 403 ? 'the App (or token) needs issues: write and pull requests: write' : undefined,
      });
      return;
    }
    // 422 (a body GitHub will not take) is this edit's alone: the next state tries again. The last
    // state has no next one: it is tried again later (the tracker backs off, then gives up).
    if (status === 422 && !final) {
      logger.warn('GitHub status: GitHub refused an edit of the tracking comment', {
        delivery: id,
        error: describe(error),
      });
      return;
    }
    throw error;
  }
}

export async function sayCheck(
  deps: SayDeps,
  id: string,
  e: SayState,
  repo: RepoRef,
  answer: AnswerTarget,
  row: StatusRow,
  facts: StatusFacts,
  rendered: RenderedStatus,
  patch: StatusPatch,
): Promise<void> {
  const { github, settings, logger } = deps;
  const write = checkWrite(rendered, facts, e.checkDigest);
  if (!write) return;
  try {
    const sha = row.checkSha ?? answer.headSha ?? (await github.headSha(repo, answer.number));
    patch.checkSha = sha;
    if (github.mode === 'app') {
      const input = {
        name: settings.checkName,
        headSha: sha,
        status: rendered.check.status,
        conclusion: rendered.check.conclusion,
        detailsUrl: facts.consoleUrl,
        externalId: id,
        title: rendered.check.title,
        summary: rendered.check.summary,
      };
      if (row.checkRunId === null) {
        patch.checkRunId = (await github.createCheckRun(repo, input)).id;
        await deps.keep(id, { checkRunId: patch.checkRunId, checkSha: sha });
      } else await github.updateCheckRun(repo, row.checkRunId, input);
    } else {
      await github.createStatus(repo, sha, commitStatusOf(rendered, settings.checkName, facts.consoleUrl));
    }
    e.checkDigest = write.digest;
    e.lastWrite = deps.now();
  } catch (error) {
    const status = statusOf(error);
    patch.lastError = `check: ${describe(error)}`;
    if (status !== undefined && status < 500 && !isRateLimited(error)) {
      e.checkDigest = write.digest;
      logger.warn('GitHub status: GitHub refused the check', {
        delivery: id,
        status,
        error: describe(error),
        hint: status === 403 ? 'the App needs checks: write (a token: commit statuses: write)' : undefined,
      });
      return;
    }
    throw error;
  }
}

export function repoOf(answer: AnswerTarget): RepoRef {
  const [owner = '', repo = ''] = answer.repository.split('/');
  return { owner, repo, installationId: answer.installationId };
}

export const statusOf = (error: unknown) => (error instanceof GitHubCallError ? error.status : undefined);
export const describe = (error: unknown) =>
  (error instanceof Error ? error.message : String(error)).slice(0, 500);
