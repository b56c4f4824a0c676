import { createHash } from 'node:crypto';
import type { Config } from '../config/schema.js';
import { describeError } from '../core/errors.js';
import { STATUS_MARKER_PREFIX } from '../core/ports/github.js';
import type { AnswerTarget, RoutedDelivery } from '../core/ports/inbox.js';
import { sanitizeLine, sanitizeUntrusted } from '../core/text.js';
import { canonicalRepository, formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { type Candidate, candidateFor, parsePayload, type RoutedPayload } from './candidate.js';
import type { GitHubUser } from './events.js';
import { DEFAULT_TEMPLATES, type MarkerSource, randomMarker, renderPrompt } from './prompt.js';

export { mentions } from './mention.js';

export type RoutingConfig = Pick<Config, 'routing' | 'repos' | 'defaults'>;

/**
 * Who we are on GitHub (issue 18): what our App and our bot write is never a trigger, nor any text
 * carrying our hidden marker. Learned at start (the App's slug, the token's user) or configured.
 */
export interface OwnIdentity {
  login?: string | undefined;
  appId?: number | undefined;
}

/** What the router makes of a delivery (the inbox stores it whole, on arrival). */
export type RouteResult = RoutedDelivery;

/** Only the keys a per-repo override actually sets. */
const defined = <T extends object>(value: T | undefined): Partial<T> =>
  Object.fromEntries(Object.entries(value ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;

const isBot = (user: GitHubUser) => user.type === 'Bot' || user.login.endsWith('[bot]');

function findRepo(config: RoutingConfig, fullName: string) {
  const key = Object.keys(config.repos).find((k) => canonicalRepository(k) === canonicalRepository(fullName));
  return key === undefined ? undefined : { key, repo: config.repos[key] as Config['repos'][string] };
}

type Repo = NonNullable<ReturnType<typeof findRepo>>;

/** The work item a payload is about, and its configured repository; or why there is none. */
function targetOf(
  parsed: RoutedPayload,
  config: RoutingConfig,
): { workItem: string; found: Repo } | Extract<RouteResult, { action: 'reject' }> {
  const fullName = parsed.p.repository.full_name;
  const number = 'issue' in parsed.p ? parsed.p.issue.number : parsed.p.pull_request.number;
  let workItem: string;
  try {
    const [owner = '', repoName = '', ...rest] = fullName.split('/');
    if (rest.length > 0) throw new Error('too many "/"');
    workItem = formatWorkItem(parseWorkItem(`github:${owner}/${repoName}#${number}`));
  } catch (error) {
    return {
      action: 'reject',
      reason: `bad repository name ${JSON.stringify(sanitizeLine(fullName, 200))}: ${describeError(error)}`,
    };
  }
  const found = findRepo(config, fullName);
  if (!found)
    return {
      action: 'reject',
      reason: `repository ${sanitizeLine(fullName, 200)} is not configured under repos:`,
      workItem,
    };
  return { workItem, found };
}

/**
 * Pure routing: (event name, payload, config) → what to do. No I/O, no clock, no session lookup:
 * `start` and `deliver` both mean "run a turn on this work item's session" (creating it if needed);
 * the dispatcher knows whether one exists.
 */
export function routeEvent(
  eventName: string,
  payload: unknown,
  config: RoutingConfig,
  nextMarker: MarkerSource = randomMarker,
  self: OwnIdentity = {},
): RouteResult {
  const parsed = parsePayload(eventName, payload);
  if (parsed === undefined)
    return { action: 'ignore', reason: `event "${sanitizeLine(eventName, 60)}" is not routed` };
  if ('invalid' in parsed) return { action: 'reject', reason: parsed.invalid };
  const target = targetOf(parsed, config);
  if ('action' in target) return target;
  const { workItem, found } = target;
  const { name } = parsed;
  const action = parsed.p.action;

  // Closing the issue or PR ends its session, whoever closed it.
  if ((parsed.name === 'issues' || parsed.name === 'pull_request') && action === 'closed') {
    const merged = parsed.name === 'pull_request' && parsed.p.pull_request.merged === true;
    return {
      action: 'close',
      workItem,
      repo: found.key,
      reason: `${name === 'issues' ? 'issue' : 'pull request'} ${merged ? 'merged' : 'closed'}`,
    };
  }

  const triggers = triggersOf(config, found.repo);
  const candidate = candidateFor(parsed, triggers);
  if (!candidate)
    return { action: 'ignore', reason: `${name}.${sanitizeLine(action, 40)} is not routed`, workItem };
  const own = ownReason(candidate, parsed.p.sender, self);
  if (own) return { action: 'ignore', reason: own, workItem };
  if (!candidate.trigger) {
    return {
      action: 'ignore',
      reason: `${name}.${action}: no trigger (mention ${triggers.mention}${triggers.labels.length ? `, labels ${triggers.labels.join(', ')}` : ''}${triggers.assignees.length ? `, assignees ${triggers.assignees.join(', ')}` : ''})`,
      workItem,
    };
  }
  const answer = answerOf(parsed, candidate);
  const refused = refusal(candidate, config, found, workItem);
  if (refused) return standing(candidate, config, found) ? { ...refused, answer } : refused;
  return planFor(candidate, config, found, workItem, nextMarker, answer);
}

/**
 * Why this is our own doing (our bot, our App, our marker in its text), never a trigger; or
 * undefined. Our status comments must not start the work they report on.
 */
function ownReason(candidate: Candidate, sender: GitHubUser, self: OwnIdentity): string | undefined {
  const login = self.login?.toLowerCase();
  if (login && (candidate.actor.login.toLowerCase() === login || sender.login.toLowerCase() === login))
    return `our own ${candidate.event} (${sanitizeLine(self.login ?? '', 100)})`;
  if (self.appId !== undefined && candidate.viaApp === self.appId)
    return `our own ${candidate.event} (performed via our GitHub App ${self.appId})`;
  // Only in the actor's own words (a comment, a review): an issue's body, written by its author,
  // must not make a maintainer's label or assignment on it "ours".
  if (candidate.template === 'comment' && candidate.body.includes(STATUS_MARKER_PREFIX))
    return `our own ${candidate.event} (it carries the-loop's status marker)`;
  return undefined;
}

const STANDING = new Set(['OWNER', 'MEMBER', 'COLLABORATOR']);

/** Where the delivery is answered on GitHub: its item, what to react to, the installation, the head. */
function answerOf(parsed: RoutedPayload, candidate: Candidate): AnswerTarget {
  return {
    repository: parsed.p.repository.full_name,
    number: candidate.number,
    pull: candidate.kind === 'pull request',
    react: candidate.react,
    installationId: parsed.p.installation?.id,
    headSha: candidate.headSha,
  };
}

/**
 * A person with standing (not a bot; an author association the repository allows, or one GitHub's
 * permissions vouch for) is told why a trigger was refused; an outsider never is, so the bot
 * cannot be used to post on anyone's behalf.
 */
function standing(candidate: Candidate, config: RoutingConfig, found: Repo): boolean {
  if (isBot(candidate.actor)) return false;
  const allowed = (found.repo.authorization?.authorAssociations ??
    config.routing.authorization.authorAssociations) as string[];
  // Never beyond owners, members and collaborators, whatever a config allows to trigger.
  const a = candidate.association;
  return a === null || (STANDING.has(a) && allowed.includes(a));
}

/**
 * The triggers a repository answers to: each its own where it sets one, else the routing's. Merged
 * field by field, not by spread: the router does this for every delivery, and object spread is a
 * slow path in V8 (~1.5 µs a spread on Node 20 here, bench:ingest).
 */
function triggersOf(config: RoutingConfig, repo: Repo['repo']): Config['routing']['triggers'] {
  const base = config.routing.triggers;
  // An override sets only the keys it names (the schema makes each optional: never null).
  const own = repo.triggers as Partial<Config['routing']['triggers']> | undefined;
  if (!own) return base;
  return {
    mention: own.mention !== undefined ? own.mention : base.mention,
    labels: own.labels !== undefined ? own.labels : base.labels,
    assignees: own.assignees !== undefined ? own.assignees : base.assignees,
  };
}

/** Invariant 6: only allowed people start work. The rejection, or undefined when they may. */
function refusal(
  candidate: Candidate,
  config: RoutingConfig,
  found: Repo,
  workItem: string,
): Extract<RouteResult, { action: 'reject' }> | undefined {
  const authorization = {
    ...config.routing.authorization,
    ...defined(found.repo.authorization),
  } as Config['routing']['authorization'];
  const who = candidate.actor;
  const login = sanitizeLine(who.login, 100);
  if (isBot(who) && !authorization.bots.includes(who.login)) {
    return {
      action: 'reject',
      reason: `bot ${login} is not allowed to trigger work (list it under authorization.bots)`,
      workItem,
    };
  }
  if (authorization.users.length > 0 && !authorization.users.includes(who.login)) {
    return { action: 'reject', reason: `${login} is not in authorization.users`, workItem };
  }
  if (
    !isBot(who) &&
    candidate.association !== null &&
    !(authorization.authorAssociations as string[]).includes(candidate.association)
  ) {
    return {
      action: 'reject',
      reason: `${login} (${sanitizeLine(candidate.association, 40)}) is not allowed to trigger work; allowed: ${authorization.authorAssociations.join(', ')}`,
      workItem,
    };
  }
  return undefined;
}

/** The turn a triggered, authorized candidate runs: its prompt rendered, its engine and runner chosen. */
function planFor(
  candidate: Candidate,
  config: RoutingConfig,
  found: Repo,
  workItem: string,
  nextMarker: MarkerSource,
  answer: AnswerTarget,
): Extract<RouteResult, { action: 'start' | 'deliver' }> {
  const { repo } = found;
  const login = sanitizeLine(candidate.actor.login, 100);
  const templates = { ...DEFAULT_TEMPLATES, ...config.routing.templates, ...repo.templates };
  const prompt = promptFor(
    templates[candidate.template],
    candidate,
    { workItem, repo: found.key, login },
    nextMarker,
  );
  return {
    action: candidate.action,
    workItem,
    repo: found.key,
    prompt,
    engine: repo.engine ?? config.routing.engine ?? config.defaults.engine,
    runner: repo.runner ?? config.routing.runner ?? config.defaults.runner,
    repoPath: repo.path,
    workspace: repo.workspace,
    author: login,
    trigger: candidate.trigger ?? '',
    routedUnder: routingDigest(config),
    answer,
  };
}

const digests = new WeakMap<RoutingConfig, string>();

/** What a stored plan remembers of the config it was made under (computed once per config object). */
export function routingDigest(config: RoutingConfig): string {
  let digest = digests.get(config);
  if (digest === undefined) {
    const { routing, repos, defaults } = config;
    digest = createHash('sha256')
      .update(JSON.stringify({ routing, repos, defaults }))
      .digest('hex')
      .slice(0, 16);
    digests.set(config, digest);
  }
  return digest;
}

/**
 * The prompt of a candidate, every outside value sanitized, around a fresh fence marker. Rendered
 * once, when the delivery arrives, and stored with it.
 */
function promptFor(
  template: string,
  candidate: Candidate,
  item: { workItem: string; repo: string; login: string },
  nextMarker: MarkerSource,
): string {
  const vars = {
    kind: candidate.kind,
    workItem: item.workItem,
    repo: item.repo,
    number: candidate.number,
    title: sanitizeLine(candidate.title),
    author: item.login,
    url: sanitizeLine(candidate.url, 500),
    event: candidate.event,
    body: sanitizeUntrusted(candidate.body),
    head: sanitizeLine(candidate.head ?? '', 300),
    base: sanitizeLine(candidate.base ?? '', 300),
  };
  return renderPrompt(template, vars, nextMarker);
}
