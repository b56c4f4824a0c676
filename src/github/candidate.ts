import type { z } from 'zod';
import type { ReactionTarget } from '../core/ports/github.js';
import { sanitizeLine } from '../core/text.js';
import { type GitHubUser, payloadSchemas, type RoutedEventName } from './events.js';
import { mentions, mentionsIn } from './mention.js';

type Payloads = { [K in RoutedEventName]: z.infer<(typeof payloadSchemas)[K]> };

/** A payload checked against the schema of its event: the event's name narrows the payload's type. */
export type RoutedPayload = { [K in RoutedEventName]: { name: K; p: Payloads[K] } }[RoutedEventName];

const checked = <K extends RoutedEventName>(
  name: K,
  result: z.ZodSafeParseResult<Payloads[K]>,
): { name: K; p: Payloads[K] } | { invalid: string } => {
  if (result.success) return { name, p: result.data };
  const issue = result.error.issues[0];
  return {
    invalid: `payload is not a valid "${name}" event: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
  };
};

/** The payload parsed by its event's schema; undefined for an event that is not routed. */
export function parsePayload(
  eventName: string,
  payload: unknown,
): RoutedPayload | { invalid: string } | undefined {
  switch (eventName) {
    case 'issues':
      return checked('issues', payloadSchemas.issues.safeParse(payload));
    case 'issue_comment':
      return checked('issue_comment', payloadSchemas.issue_comment.safeParse(payload));
    case 'pull_request':
      return checked('pull_request', payloadSchemas.pull_request.safeParse(payload));
    case 'pull_request_review_comment':
      return checked(
        'pull_request_review_comment',
        payloadSchemas.pull_request_review_comment.safeParse(payload),
      );
    case 'pull_request_review':
      return checked('pull_request_review', payloadSchemas.pull_request_review.safeParse(payload));
    default:
      return undefined;
  }
}

/** What may start or continue work: the item, who asked and what triggered it (null: nothing did). */
export interface Candidate {
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
  /** What the eyes reaction goes on (undefined: a review, which GitHub gives no reactions). */
  react: ReactionTarget | undefined;
  /** A pull request's head commit, when the payload carries it. */
  headSha: string | undefined;
  /** The App that wrote it (`performed_via_github_app`), when an App did. */
  viaApp: number | undefined;
}

export interface Triggers {
  mention: string;
  labels: string[];
  assignees: string[];
}

type Item = Payloads['issues']['issue'] | Payloads['pull_request']['pull_request'];

/** A pull request's head and base branch names, when the payload has them (an issue has none). */
function branches(item: Item | Payloads['pull_request_review']['pull_request']) {
  return 'head' in item
    ? { head: item.head?.ref, base: item.base?.ref, headSha: item.head?.sha }
    : { head: undefined, base: undefined, headSha: undefined };
}

/**
 * Only the author's own words: not quoted, not code, not an HTML comment (see mention.ts). A title is
 * plain text on GitHub, so a mention in it counts as written.
 */
const byMention = (triggers: Triggers, markdown: string | null | undefined, title?: string) =>
  mentions(markdown, triggers.mention) || mentionsIn(title, triggers.mention)
    ? `mention ${triggers.mention}`
    : null;

/** The candidate of a routed payload: opening, labelling, assigning, commenting, reviewing; else null. */
export function candidateFor(parsed: RoutedPayload, triggers: Triggers): Candidate | null {
  switch (parsed.name) {
    case 'issues':
      return itemCandidate('issue', parsed.p, parsed.p.issue, triggers);
    case 'pull_request':
      return itemCandidate('pull request', parsed.p, parsed.p.pull_request, triggers);
    case 'issue_comment': {
      const e = parsed.p;
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
        trigger: byMention(triggers, e.comment.body),
        react: e.comment.id === undefined ? undefined : { kind: 'issue-comment', id: e.comment.id },
        headSha: undefined,
        viaApp: e.comment.performed_via_github_app?.id,
      };
    }
    case 'pull_request_review_comment':
    case 'pull_request_review':
      return reviewCandidate(parsed, triggers);
  }
}

function itemCandidate(
  kind: Candidate['kind'],
  p: Payloads['issues'] | Payloads['pull_request'],
  item: Item,
  triggers: Triggers,
): Candidate | null {
  const { action } = p;
  if (action === 'opened' || action === 'reopened') {
    const label = item.labels?.find((l) => triggers.labels.includes(l.name));
    const assignee = item.assignees?.find((a) => triggers.assignees.includes(a.login));
    return itemStart(kind, item, {
      event: `${kind} ${action}`,
      actor: item.user,
      association: item.author_association ?? 'NONE',
      trigger:
        byMention(triggers, item.body, item.title) ??
        (label ? `label ${label.name}` : null) ??
        (assignee ? `assignee ${assignee.login}` : null),
    });
  }
  if (action !== 'labeled' && action !== 'assigned') return null;
  // Labeling and assigning need triage/write permission on GitHub, so the sender is vouched for by
  // it — except when the sender is the item's own author: labels from an issue template are applied
  // as the author, who may be anyone. Then the author's association decides.
  const association = p.sender.login === item.user.login ? (item.author_association ?? 'NONE') : null;
  if (action === 'labeled') {
    const label = p.label?.name;
    return itemStart(kind, item, {
      event: `${kind} labeled "${sanitizeLine(label ?? '', 100)}"`,
      actor: p.sender,
      association,
      trigger: label && triggers.labels.includes(label) ? `label ${label}` : null,
    });
  }
  const assignee = p.assignee?.login;
  return itemStart(kind, item, {
    event: `${kind} assigned to ${sanitizeLine(assignee ?? '?', 100)}`,
    actor: p.sender,
    association,
    trigger: assignee && triggers.assignees.includes(assignee) ? `assignee ${assignee}` : null,
  });
}

/**
 * The candidate that starts work on an issue or pull request, built field by field: the router
 * makes one for every delivery, and object spread is a slow path in V8 (~1.5 µs a spread on Node 20
 * here, bench:ingest).
 */
function itemStart(
  kind: Candidate['kind'],
  item: Item,
  who: Pick<Candidate, 'event' | 'actor' | 'association' | 'trigger'>,
): Candidate {
  const { head, base, headSha } = branches(item);
  return {
    action: 'start',
    number: item.number,
    kind,
    title: item.title,
    url: item.html_url ?? '',
    body: item.body ?? '',
    head,
    base,
    event: who.event,
    template: 'issue',
    actor: who.actor,
    association: who.association,
    trigger: who.trigger,
    react: { kind: 'issue', number: item.number },
    headSha,
    viaApp: item.performed_via_github_app?.id,
  };
}

function reviewCandidate(
  parsed: Extract<RoutedPayload, { name: 'pull_request_review_comment' | 'pull_request_review' }>,
  triggers: Triggers,
): Candidate | null {
  const pr = parsed.p.pull_request;
  const common = {
    action: 'deliver',
    number: pr.number,
    kind: 'pull request',
    title: pr.title,
    ...branches(pr),
    template: 'comment',
  } as const;
  if (parsed.name === 'pull_request_review_comment') {
    const e = parsed.p;
    if (e.action !== 'created') return null;
    return {
      ...common,
      url: e.comment.html_url ?? pr.html_url ?? '',
      body: e.comment.body ?? '',
      event: 'review comment',
      actor: e.comment.user,
      association: e.comment.author_association ?? 'NONE',
      trigger: byMention(triggers, e.comment.body),
      react: e.comment.id === undefined ? undefined : { kind: 'review-comment', id: e.comment.id },
      viaApp: e.comment.performed_via_github_app?.id,
    };
  }
  const e = parsed.p;
  if (e.action !== 'submitted') return null;
  return {
    ...common,
    url: e.review.html_url ?? pr.html_url ?? '',
    body: e.review.body ?? '',
    event: `review (${sanitizeLine(e.review.state ?? 'commented', 40).toLowerCase()})`,
    actor: e.review.user,
    association: e.review.author_association ?? 'NONE',
    trigger: byMention(triggers, e.review.body),
    react: undefined,
    viaApp: e.review.performed_via_github_app?.id,
  };
}
