import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Policy } from '../acts/decide.js';
import type { ActDetail, ActKind } from '../acts/types.js';
import type { CredentialKind } from '../core/credential.js';
import type { Usage } from '../core/events.js';
import type { Logger } from '../log/logger.js';

/**
 * The gateway's contract: what its request handlers (git smart HTTP, GitHub API, model APIs) get
 * from the daemon. Everything here lives in the daemon, out of the engine's reach (invariant 9):
 * the policy, the real credentials, the ledger and the record of acts. Handlers never see another
 * session's data and never hold a credential longer than one request.
 */

export type ModelApi = 'anthropic' | 'openai' | 'gemini';
export const MODEL_APIS = ['anthropic', 'openai', 'gemini'] as const satisfies readonly ModelApi[];

/** The session a capability token stands for (its session is active; the token is not revoked). */
export interface GatewaySession {
  id: string;
  workItem: string;
  /** The work item's repository, as written in the work item (compare case-insensitively). */
  owner: string;
  repo: string;
  engine: string;
  cwd: string;
}

export type WireOutcome = 'succeeded' | 'failed' | 'blocked' | 'unknown';

/** A consequential act seen on the wire: its outcome is certain (what the upstream answered, or our refusal). */
export interface WireAct {
  kind: ActKind;
  /** What was asked, in words a person reads: `git-receive-pack refs/heads/main`, `PUT /repos/o/r/pulls/1/merge`. */
  command: string;
  detail: ActDetail;
  outcome: WireOutcome;
  verdict: 'allow' | 'deny';
  /** The rule that decided, e.g. `git-push: deny-protected`. */
  rule: string;
  reason?: string | undefined;
}

/** The usage of one model request, read from the response itself. */
export interface WireUsage {
  api: ModelApi;
  /** The response's own id (`msg_…`, `resp_…`, Gemini's responseId); null when none arrived. */
  responseId: string | null;
  model: string | null;
  usage: Usage;
  /** The response ended before its final usage (a cut stream): figures as far as it got. */
  partial: boolean;
  /** When the request was made (ISO). */
  at: string;
}

/** Where a session's model requests go, and the real credential put in place of its token. */
export interface ModelRoute {
  api: ModelApi;
  /** Upstream base URL without a trailing slash, e.g. `https://api.anthropic.com`. */
  upstream: string;
  /** undefined: the engine's own credential (a subscription's OAuth bearer) passes through unchanged. */
  credential?: { value: string; kind: CredentialKind } | undefined;
}

/** What the gateway's handlers use: the daemon's side of the wire. */
export interface GatewayPorts {
  logger: Logger;
  /** The merge policy of a work item's repository (from the daemon's config, never a file the agent writes). */
  policyFor(workItem: string): Policy;
  /** Record an act seen on the wire (attributed to the session's current turn). */
  recordAct(session: GatewaySession, act: WireAct): Promise<void>;
  /** Record one model request's usage in the ledger (meter `wire`, keyed by its response id). */
  recordUsage(session: GatewaySession, usage: WireUsage): Promise<void>;
  /** Where the session's engine's model requests go; undefined: this engine has no model route. */
  modelRoute(session: GatewaySession): ModelRoute | undefined;
  /**
   * Checked before every model request is forwarded: the session or its work item over a token or
   * dollar ceiling gives the reason (and the session is held); undefined: go on.
   */
  overBudget(session: GatewaySession): Promise<string | undefined>;
  /** GitHub, as the gateway reaches it. */
  github: GitHubUpstream;
}

export interface GitHubUpstream {
  /** Where git smart HTTP requests go, e.g. `https://github.com` (no trailing slash). */
  gitUrl: string;
  /** Where REST and GraphQL requests go, e.g. `https://api.github.com` (no trailing slash). */
  apiUrl: string;
  /**
   * The real credential for the session's repository (sent as Basic `x-access-token:<token>` to git,
   * `Bearer` to the API): the GitHub App installation's token that covers it, or the configured
   * token; undefined: none. Asked per request (an installation token is short-lived; the client
   * keeps it). Never throws: a credential that cannot be had is logged where it failed.
   */
  tokenFor(session: GatewaySession): Promise<string | undefined>;
  /**
   * The upstream answered 401 to the credential `tokenFor` gave for this session: forget it (an
   * installation token revoked before its expiry), so the next request carries a fresh one.
   */
  tokenRefused?(session: GatewaySession): void;
}

/**
 * One request, authorized: the handlers' signature. `path` is what follows the route's prefix (with
 * the query string); `token` is the capability token that authorized it (a handler replaces it with
 * the real credential wherever the client put it, and never forwards it).
 */
export type GatewayHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  ctx: { session: GatewaySession; path: string; ports: GatewayPorts; token: string },
) => Promise<void>;
