import type { z } from 'zod';
import type { Config } from '../config/schema.js';
import { describeError } from '../core/errors.js';
import { canonicalRepository, formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { type GitHubUser, payloadSchemas, type RoutedEventName } from './events.js';
import { mentions, mentionsIn } from './mention.js';
import {
  DEFAULT_TEMPLATES,
  type MarkerSource,
  randomMarker,
  renderPrompt,
  sanitizeLine,
  sanitizeUntrusted,
} from './prompt.js';

export { mentions } from './mention.js';

export type RoutingConfig = Pick<Config, 'routing' | 'repos' | 'defaults'>;

export type RouteResult =
  | {
      action: 'start' | 'deliver';
      workItem: string;
      repo: string;
      prompt: string;
      engine: string;
      runner: string;
      repoPath: string;
      workspace: 'checkout' | 'worktree';
      author: string;
      trigger: string;
    }
  | { action: 'close'; workItem: string; repo: string; reason: string }
  | { action: 'ignore'; reason: string; workItem?: string | undefined }
  | { action: 'reject'; reason: string; workItem?: string | undefined };

type Payloads = { [K in RoutedEventName]: z.infer<(typeof payloadSchemas)[K]> };

interface Candidate {
  action: 'start' | 'deliver';
  number: number;
  kind: 'issue' | 'pull request';
  title: string;
  url: string;
  body: string;
  /** A pull request's branches, when the payload carries them. */
  head?: string | undefined;
  base?: string | undefined;
  event: string;
  template: 'issue' | 'comment';
  /** Who asked: their login, type and association (null when GitHub's permissions vouch for them). */
  actor: GitHubUser;
  association: string | null;
  trigger: string | null;
}

/** Only the keys a per-repo override actually sets. */
const defined = <T extends object>(value: T | undefined): Partial<T> =>
  Object.fromEntries(Object.entries(value ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;

const isBot = (user: GitHubUser) => user.type === 'Bot' || user.login.endsWith('[bot]');

function findRepo(config: RoutingConfig, fullName: string) {
  const key = Object.keys(config.repos).find((k) => canonicalRepository(k) === canonicalRepository(fullName));
  return key === undefined ? undefined : { key, repo: config.repos[key] as Config['repos'][string] };
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
): RouteResult {
  if (!Object.hasOwn(payloadSchemas, eventName))
    return { action: 'ignore', reason: `event "${sanitizeLine(eventName, 60)}" is not routed` };
  const name = eventName as RoutedEventName;
  const parsed = payloadSchemas[name].safeParse(payload);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      action: 'reject',
      reason: `payload is not a valid "${name}" event: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
    };
  }
  const p = parsed.data as Payloads[typeof name];
  const fullName = p.repository.full_name;
  const number = 'issue' in p ? p.issue.number : p.pull_request.number;
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
  const { repo } = found;
  const triggers = { ...config.routing.triggers, ...defined(repo.triggers) } as Config['routing']['triggers'];
  const authorization = {
    ...config.routing.authorization,
    ...defined(repo.authorization),
  } as Config['routing']['authorization'];
  const action = p.action;

  // Closing the issue or PR ends its session, whoever closed it.
  if ((name === 'issues' || name === 'pull_request') && action === 'closed') {
    const merged = name === 'pull_request' && (p as Payloads['pull_request']).pull_request.merged === true;
    return {
      action: 'close',
      workItem,
      repo: found.key,
      reason: `${name === 'issues' ? 'issue' : 'pull request'} ${merged ? 'merged' : 'closed'}`,
    };
  }

  const candidate = candidateFor(name, p, triggers);
  if (!candidate)
    return { action: 'ignore', reason: `${name}.${sanitizeLine(action, 40)} is not routed`, workItem };
  if (!candidate.trigger) {
    return {
      action: 'ignore',
      reason: `${name}.${action}: no trigger (mention ${triggers.mention}${triggers.labels.length ? `, labels ${triggers.labels.join(', ')}` : ''}${triggers.assignees.length ? `, assignees ${triggers.assignees.join(', ')}` : ''})`,
      workItem,
    };
  }

  // Invariant 6: only allowed people start work.
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
    trigger: candidate.trigger,
  };
}

/**
 * The prompt of a candidate, every outside value sanitized. A fresh fence marker per prompt: the
 * ingress's render and the dispatcher's differ, and neither is kept (the ingress stores only the
 * route's action and work item).
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

/** A pull request's head and base branch names, when the payload has them (an issue has none). */
function branches(item: object): { head: string | undefined; base: string | undefined } {
  const pr = item as { head?: { ref: string }; base?: { ref: string } };
  return { head: pr.head?.ref, base: pr.base?.ref };
}

function candidateFor(
  name: RoutedEventName,
  p: Payloads[RoutedEventName],
  triggers: { mention: string; labels: string[]; assignees: string[] },
): Candidate | null {
  // Only the author's own words: not quoted, not code, not an HTML comment (see mention.ts). A
  // title is plain text on GitHub, so a mention in it counts as written.
  const byMention = (markdown: string | null | undefined, title?: string) =>
    mentions(markdown, triggers.mention) || mentionsIn(title, triggers.mention)
      ? `mention ${triggers.mention}`
      : null;
  if (name === 'issues' || name === 'pull_request') {
    const item =
      name === 'issues' ? (p as Payloads['issues']).issue : (p as Payloads['pull_request']).pull_request;
    const kind = name === 'issues' ? 'issue' : 'pull request';
    const common = {
      number: item.number,
      kind,
      title: item.title,
      url: item.html_url ?? '',
      body: item.body ?? '',
      ...branches(item),
      template: 'issue',
    } as const;
    const { action } = p as Payloads['issues'];
    if (action === 'opened' || action === 'reopened') {
      const label = item.labels?.find((l) => triggers.labels.includes(l.name));
      const assignee = item.assignees?.find((a) => triggers.assignees.includes(a.login));
      return {
        ...common,
        action: 'start',
        event: `${kind} ${action}`,
        actor: item.user,
        association: item.author_association ?? 'NONE',
        trigger:
          byMention(item.body, item.title) ??
          (label ? `label ${label.name}` : null) ??
          (assignee ? `assignee ${assignee.login}` : null),
      };
    }
    // Labeling and assigning need triage/write permission on GitHub, so the sender is vouched for by
    // it — except when the sender is the item's own author: labels from an issue template are applied
    // as the author, who may be anyone. Then the author's association decides.
    const senderStanding = p.sender.login === item.user.login ? (item.author_association ?? 'NONE') : null;
    if (action === 'labeled') {
      const label = (p as Payloads['issues']).label?.name;
      return {
        ...common,
        action: 'start',
        event: `${kind} labeled "${sanitizeLine(label ?? '', 100)}"`,
        actor: p.sender,
        association: senderStanding,
        trigger: label && triggers.labels.includes(label) ? `label ${label}` : null,
      };
    }
    if (action === 'assigned') {
      const assignee = (p as Payloads['issues']).assignee?.login;
      return {
        ...common,
        action: 'start',
        event: `${kind} assigned to ${sanitizeLine(assignee ?? '?', 100)}`,
        actor: p.sender,
        association: senderStanding,
        trigger: assignee && triggers.assignees.includes(assignee) ? `assignee ${assignee}` : null,
      };
    }
    return null;
  }
  if (name === 'issue_comment') {
    const e = p as Payloads['issue_comment'];
    if (e.action !== 'created') return null;
    return {
      action: 'deliver',
      number: e.issue.number,
      kind: e.issue.pull_request ? 'pull request' : 'issue',
      title: e.issue.title,
      url: e.comment.html_url ?? e.issue.html_url ?? '',
      body: e.comment.body ?? '',
      event: 'comment',
      template: 'comment',
      actor: e.comment.user,
      association: e.comment.author_association ?? 'NONE',
      trigger: byMention(e.comment.body),
    };
  }
  if (name === 'pull_request_review_comment') {
    const e = p as Payloads['pull_request_review_comment'];
    if (e.action !== 'created') return null;
    return {
      action: 'deliver',
      number: e.pull_request.number,
      kind: 'pull request',
      title: e.pull_request.title,
      url: e.comment.html_url ?? e.pull_request.html_url ?? '',
      body: e.comment.body ?? '',
      ...branches(e.pull_request),
      event: 'review comment',
      template: 'comment',
      actor: e.comment.user,
      association: e.comment.author_association ?? 'NONE',
      trigger: byMention(e.comment.body),
    };
  }
  const e = p as Payloads['pull_request_review'];
  if (e.action !== 'submitted') return null;
  return {
    action: 'deliver',
    number: e.pull_request.number,
    kind: 'pull request',
    title: e.pull_request.title,
    url: e.review.html_url ?? e.pull_request.html_url ?? '',
    body: e.review.body ?? '',
    ...branches(e.pull_request),
    event: `review (${sanitizeLine(e.review.state ?? 'commented', 40).toLowerCase()})`,
    template: 'comment',
    actor: e.review.user,
    association: e.review.author_association ?? 'NONE',
    trigger: byMention(e.review.body),
  };
}
