import { createAppAuth } from '@octokit/auth-app';
import { isRsaPrivateKey } from '../config/github-secrets.js';
import { LoopError } from '../core/errors.js';
import {
  type CheckRunInput,
  GitHubCallError,
  type GitHubIdentity,
  type GitHubWrites,
  type ReactionTarget,
  type RepoRef,
} from '../core/ports/github.js';
import type { Logger } from '../log/logger.js';
import { AppTokens } from './app-tokens.js';
import { toCallError } from './call-error.js';
import { createOctokit, type PacedOctokit } from './octokit.js';

/**
 * The daemon's GitHub client (issue 18): what it says on GitHub (the GitHubWrites port), and the
 * credential the gateway sends upstream for a repository. As the App: the installation's token,
 * minted with the App's JWT and kept until five minutes before it expires; with a token: that token.
 */

export type GitHubAuth =
  | { kind: 'app'; appId: number; privateKey: string; installationId?: number | undefined }
  | { kind: 'token'; token: string };

export interface GitHubClientOptions {
  /** REST API base, e.g. `https://api.github.com` (no trailing slash). */
  baseUrl: string;
  auth: GitHubAuth;
  pacing: { writeGapMs: number; commentGapMs: number; writesPerHour?: number | undefined };
  logger: Logger;
  /** The clock the installation tokens' expiry is read against (ms). Default Date.now. */
  now?: (() => number) | undefined;
  userAgent: string;
  /** Our own login when it is configured (`github.botLogin`): what identity() says if GitHub cannot. */
  botLogin?: string | undefined;
  /** The unit of `retry-after` and of the 5xx backoff (ms; default 1000). Tests make it small. */
  retryBaseMs?: number | undefined;
}

export interface GitHubClient extends GitHubWrites {
  /** The credential the gateway sends upstream for `owner/repo`; undefined: none could be had (logged). */
  tokenFor(repoFullName: string): Promise<string | undefined>;
  /** A payload named the installation that covers `owner/repo`: use it from now on. */
  noteInstallation(repoFullName: string, installationId: number): void;
  /** GitHub refused the token tokenFor gave for `owner/repo` (the gateway saw a 401): forget it. */
  tokenRefused(repoFullName: string): void;
  /** Stop the unref'd cleanup timers of its pacing limiters (the daemon is disposing the client). */
  close(): void;
}

type Params = Record<string, unknown>;

/** Throws LoopError('config-invalid') when the App's key does not parse (never quoting it). */
export function createGitHubClient(options: GitHubClientOptions): GitHubClient {
  if (options.auth.kind === 'app' && !isRsaPrivateKey(options.auth.privateKey)) {
    throw new LoopError('config-invalid', 'github.app.privateKey is not a PEM RSA private key', {
      hint: "Give the .pem file GitHub made for the App (its settings page, 'Private keys'), as env:NAME.",
    });
  }
  const { octokit, close } = createOctokit(options);
  const { logger } = options;
  const app = options.auth.kind === 'app' ? appTokens(octokit, options.auth, options) : undefined;
  const staticToken = options.auth.kind === 'token' ? options.auth.token : undefined;

  const call = caller(octokit, app, staticToken, logger);
  return {
    mode: options.auth.kind,
    identity: identityOnce(octokit, app, options),
    ...writesVia(call),
    tokenFor: async (repoFullName) => {
      if (!app) return staticToken;
      const [owner = '', repo = ''] = repoFullName.split('/');
      try {
        return await app.token(await app.installationFor(owner, repo));
      } catch (error) {
        const failure = toCallError(error, { method: 'POST', path: '(installation token)' });
        logger.warn('no GitHub App installation token for a repository', {
          repo: repoFullName,
          error: failure.message,
        });
        return undefined;
      }
    },
    noteInstallation: (repoFullName, installationId) => app?.noteInstallation(repoFullName, installationId),
    close,
    tokenRefused: (repoFullName) => {
      const dropped = app?.dropFor(repoFullName);
      if (dropped !== undefined)
        logger.warn('GitHub refused an installation token: the next request gets another', {
          installation: dropped,
        });
    },
  };
}

type Call = (repo: RepoRef, route: string, params: Params) => Promise<unknown>;

/** One call with the credential for `repo`; an installation token GitHub refuses is minted again once. */
function caller(
  octokit: PacedOctokit,
  app: AppTokens | undefined,
  staticToken: string | undefined,
  logger: Logger,
): Call {
  return async (repo, route, params) => {
    const [method = 'GET', path = route] = route.split(' ');
    try {
      if (!app) return (await octokit.request(route, withAuth(params, `token ${staticToken}`))).data;
      const installation = await app.installationFor(repo.owner, repo.repo, repo.installationId);
      const token = await app.token(installation);
      try {
        return (await octokit.request(route, withAuth(params, `token ${token}`))).data;
      } catch (error) {
        if ((error as { status?: unknown }).status !== 401) throw error;
        logger.warn('GitHub refused the installation token: minting another', { installation });
        app.drop(installation);
        const again = await app.token(installation);
        return (await octokit.request(route, withAuth(params, `token ${again}`))).data;
      }
    } catch (error) {
      throw toCallError(error, { method, path });
    }
  };
}

/** The port's writes, each one call. */
function writesVia(call: Call): Omit<GitHubWrites, 'mode' | 'identity'> {
  const target = (repo: RepoRef) => ({ owner: repo.owner, repo: repo.repo });
  return {
    react: async (repo, on, content) => {
      await call(repo, `POST ${reactionPath(on)}`, { ...target(repo), ...reactionIds(on), content });
    },
    createComment: async (repo, issueNumber, body) => {
      const data = await call(repo, 'POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
        ...target(repo),
        issue_number: issueNumber,
        body,
      });
      return { id: numberField(data, 'id', 'the new comment') };
    },
    updateComment: async (repo, commentId, body) => {
      await call(repo, 'PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', {
        ...target(repo),
        comment_id: commentId,
        body,
      });
    },
    headSha: async (repo, pullNumber) => {
      const data = await call(repo, 'GET /repos/{owner}/{repo}/pulls/{pull_number}', {
        ...target(repo),
        pull_number: pullNumber,
      });
      const sha = (data as { head?: { sha?: unknown } } | undefined)?.head?.sha;
      if (typeof sha !== 'string')
        throw new GitHubCallError('GitHub gave a pull request without a head sha', 200);
      return sha;
    },
    createCheckRun: async (repo, input) => {
      const data = await call(repo, 'POST /repos/{owner}/{repo}/check-runs', {
        ...target(repo),
        ...checkRunBody(input),
      });
      return { id: numberField(data, 'id', 'the new check run') };
    },
    updateCheckRun: async (repo, id, input) => {
      await call(repo, 'PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}', {
        ...target(repo),
        check_run_id: id,
        // A check run's commit is fixed when it is created.
        ...checkRunBody(input, false),
      });
    },
    createStatus: async (repo, sha, input) => {
      await call(repo, 'POST /repos/{owner}/{repo}/statuses/{sha}', {
        ...target(repo),
        sha,
        state: input.state,
        context: input.context,
        description: input.description,
        ...(input.targetUrl ? { target_url: input.targetUrl } : {}),
      });
    },
  };
}

function appTokens(
  octokit: PacedOctokit,
  auth: Extract<GitHubAuth, { kind: 'app' }>,
  options: GitHubClientOptions,
): AppTokens {
  const log = (message: unknown) =>
    options.logger.debug(`octokit auth-app: ${String(message).slice(0, 300)}`);
  const appAuth = createAppAuth({
    appId: auth.appId,
    privateKey: auth.privateKey,
    request: octokit.request,
    log: { warn: log, debug: log, info: log, error: log },
  });
  const jwt = async () => (await appAuth({ type: 'app' })).token;
  return new AppTokens({
    now: options.now ?? Date.now,
    logger: options.logger,
    installationId: auth.installationId,
    calls: {
      jwt,
      mint: async (installationId) => {
        // refresh: auth-app's own cache reads the wall clock; ours (AppTokens) reads the injected one.
        const got = await appAuth({ type: 'installation', installationId, refresh: true });
        return { token: got.token, expiresAt: got.expiresAt };
      },
      installationOf: async (owner, repo) => {
        const { data } = await octokit.request('GET /repos/{owner}/{repo}/installation', {
          owner,
          repo,
          headers: { authorization: `bearer ${await jwt()}` },
        });
        return data.id;
      },
    },
  });
}

/** Who we are, asked until GitHub answers once: the App's slug (`<slug>[bot]`) or the token's user. */
function identityOnce(
  octokit: PacedOctokit,
  app: AppTokens | undefined,
  options: GitHubClientOptions,
): () => Promise<GitHubIdentity> {
  let asked: Promise<GitHubIdentity> | undefined;
  const appId = options.auth.kind === 'app' ? options.auth.appId : undefined;
  const ask = async (): Promise<GitHubIdentity> => {
    if (app) {
      const { data } = await octokit.request('GET /app', {
        headers: { authorization: `bearer ${await app.jwt()}` },
      });
      const slug = data?.slug;
      return { login: options.botLogin ?? (slug ? `${slug}[bot]` : undefined), appId: data?.id ?? appId };
    }
    const token = options.auth.kind === 'token' ? options.auth.token : '';
    const { data } = await octokit.request('GET /user', { headers: { authorization: `token ${token}` } });
    return { login: options.botLogin ?? data.login, appId: undefined };
  };
  let warned = false;
  return () => {
    asked ??= ask().catch((error: unknown) => {
      // Not kept: the next caller asks again (GitHub may be back); said once, not at every event.
      asked = undefined;
      if (!warned) {
        warned = true;
        const failure = toCallError(error, { method: 'GET', path: app ? '/app' : '/user' });
        options.logger.warn('could not learn who we are on GitHub', { error: failure.message });
      }
      return { login: options.botLogin, appId };
    });
    return asked;
  };
}

function withAuth(params: Params, authorization: string): Params {
  return { ...params, headers: { authorization } };
}

function reactionPath(on: ReactionTarget): string {
  switch (on.kind) {
    case 'issue':
      return '/repos/{owner}/{repo}/issues/{issue_number}/reactions';
    case 'issue-comment':
      return '/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions';
    case 'review-comment':
      return '/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions';
  }
}

function reactionIds(on: ReactionTarget): Params {
  return on.kind === 'issue' ? { issue_number: on.number } : { comment_id: on.id };
}

function checkRunBody(input: CheckRunInput, withSha = true): Params {
  return {
    name: input.name,
    ...(withSha ? { head_sha: input.headSha } : {}),
    status: input.status,
    ...(input.status === 'completed' && input.conclusion ? { conclusion: input.conclusion } : {}),
    ...(input.detailsUrl ? { details_url: input.detailsUrl } : {}),
    ...(input.externalId ? { external_id: input.externalId } : {}),
    output: { title: input.title, summary: input.summary },
  };
}

function numberField(data: unknown, field: string, what: string): number {
  const value = (data as Record<string, unknown> | undefined)?.[field];
  if (typeof value !== 'number')
    throw new GitHubCallError(`GitHub gave ${what} without a numeric ${field}`, 200);
  return value;
}
