/**
 * What the daemon tells GitHub about the work it does (issue 18): reactions, one tracking comment
 * per turn, a check run (App) or commit status (token) on a pull request. The centre decides what to
 * say; an adapter (src/github-api/) says it, authenticated as the GitHub App's installation or with
 * a token, paced and retried. Every method either does what it says or throws a GitHubCallError.
 */

/**
 * The hidden marker every comment the daemon writes carries: an event whose text holds it is our
 * own, never a trigger (with our App's id and our bot's login, see routeEvent).
 */
export const STATUS_MARKER_PREFIX = '<!-- the-loop:status';

/** A repository, with the App installation that covers it when the payload named one. */
export interface RepoRef {
  owner: string;
  repo: string;
  /** From the webhook payload's `installation.id` (App mode); undefined: looked up or configured. */
  installationId?: number | undefined;
}

/** What a reaction goes on: the issue or pull request itself, or a comment on it. */
export type ReactionTarget =
  | { kind: 'issue'; number: number }
  | { kind: 'issue-comment'; id: number }
  | { kind: 'review-comment'; id: number };

export type CheckConclusion =
  | 'success'
  | 'failure'
  | 'neutral'
  | 'cancelled'
  | 'timed_out'
  | 'action_required';

export interface CheckRunInput {
  name: string;
  headSha: string;
  status: 'queued' | 'in_progress' | 'completed';
  /** Required when completed. */
  conclusion?: CheckConclusion | undefined;
  detailsUrl?: string | undefined;
  /** The delivery id: finds the run again after a restart. */
  externalId?: string | undefined;
  /** The output's title (GitHub: required with a summary) and summary (Markdown, ≤ 65,535 chars). */
  title: string;
  summary: string;
}

export interface CommitStatusInput {
  state: 'pending' | 'success' | 'failure' | 'error';
  context: string;
  /** ≤ 140 characters (GitHub truncates nothing: it refuses more). */
  description: string;
  targetUrl?: string | undefined;
}

/** Who we are on GitHub: events from this login or App are our own, never triggers. */
export interface GitHubIdentity {
  /** `<app slug>[bot]` (App) or the token's user; undefined when it could not be learned. */
  login: string | undefined;
  /** The App's id (App mode). */
  appId: number | undefined;
}

export interface GitHubWrites {
  /** App: check runs; token: commit statuses. */
  readonly mode: 'app' | 'token';
  identity(): Promise<GitHubIdentity>;
  react(repo: RepoRef, target: ReactionTarget, content: 'eyes'): Promise<void>;
  createComment(repo: RepoRef, issueNumber: number, body: string): Promise<{ id: number }>;
  updateComment(repo: RepoRef, commentId: number, body: string): Promise<void>;
  /** The head commit of a pull request now. */
  headSha(repo: RepoRef, pullNumber: number): Promise<string>;
  createCheckRun(repo: RepoRef, input: CheckRunInput): Promise<{ id: number }>;
  updateCheckRun(repo: RepoRef, id: number, input: CheckRunInput): Promise<void>;
  createStatus(repo: RepoRef, sha: string, input: CommitStatusInput): Promise<void>;
}

/**
 * A call GitHub refused or that did not reach it, after the client's own retries and waits.
 * `status` is GitHub's HTTP status (undefined: no answer: network, timeout, a key that does not
 * parse). The message is safe to log: it never holds a token or a key.
 */
export class GitHubCallError extends Error {
  readonly status: number | undefined;
  /** A rate limit GitHub kept up after the client's waits (403/429): temporary, not a refusal. */
  readonly rateLimited: boolean;
  constructor(
    message: string,
    status: number | undefined,
    options?: { cause?: unknown; rateLimited?: boolean },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GitHubCallError';
    this.status = status;
    this.rateLimited = options?.rateLimited ?? false;
  }
}
