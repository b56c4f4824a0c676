import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { STATUS_MARKER_PREFIX } from '../../src/core/ports/github.js';
import { type RouteResult, type RoutingConfig, routeEvent } from '../../src/github/route.js';

/** Issue 18: where a delivery is answered on GitHub, who is told why, and what is our own. */

const FIXTURES = new URL('../fixtures/github/', import.meta.url);
// biome-ignore lint/suspicious/noExplicitAny: fixture payloads are edited freely here.
const fixture = (file: string): any => JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8'));

const config: RoutingConfig = configSchema.parse({ repos: { 'acme/widgets': { path: '/tmp/x' } } });
const SELF = { login: 'the-loop-app[bot]', appId: 4242 };
const route = (event: string, payload: unknown, c: RoutingConfig = config): RouteResult =>
  routeEvent(event, payload, c, undefined, SELF);

describe('the answer target of a routed delivery', () => {
  it('a comment: react to the comment, through the installation of the payload', () => {
    const p = fixture('issue_comment.created.json');
    const r = route('issue_comment', p);
    expect(r.action).toBe('deliver');
    expect(r.action === 'deliver' && r.answer).toStrictEqual({
      repository: 'acme/widgets',
      number: p.issue.number,
      pull: false,
      react: { kind: 'issue-comment', id: p.comment.id },
      installationId: p.installation.id,
      headSha: undefined,
    });
  });

  it("a pull request opened: react to the pull request, and keep its head's sha for the check", () => {
    const p = fixture('pull_request.opened.json');
    p.pull_request.body = '@the-loop review this';
    const r = route('pull_request', p);
    expect(r.action).toBe('start');
    if (r.action !== 'start') return;
    expect(r.answer?.react).toStrictEqual({ kind: 'issue', number: p.pull_request.number });
    expect(r.answer?.pull).toBe(true);
    expect(r.answer?.headSha).toBe(p.pull_request.head.sha);
  });

  it('a review comment reacts to the comment; a review has nothing to react to', () => {
    const c = fixture('pull_request_review_comment.created.json');
    c.comment.body = '@the-loop fix';
    const rc = route('pull_request_review_comment', c);
    expect(rc.action === 'deliver' && rc.answer?.react).toStrictEqual({
      kind: 'review-comment',
      id: c.comment.id,
    });
    const v = fixture('pull_request_review.submitted.json');
    v.review.body = '@the-loop fix';
    const rv = route('pull_request_review', v);
    expect(rv.action).toBe('deliver');
    expect(rv.action === 'deliver' && rv.answer?.react).toBeUndefined();
  });

  it('hostile answer fields never reject an otherwise good delivery: they are dropped', () => {
    const p = fixture('issue_comment.created.json');
    p.comment.id = 'DROP TABLE';
    p.installation = { id: -5 };
    p.comment.performed_via_github_app = 'nope';
    const r = route('issue_comment', p);
    expect(r.action).toBe('deliver');
    expect(r.action === 'deliver' && r.answer?.react).toBeUndefined();
    expect(r.action === 'deliver' && r.answer?.installationId).toBeUndefined();
  });
});

describe('our own events are never triggers (dropped before routing, recorded as ignored)', () => {
  it("our bot's comment mentioning @the-loop is ignored, naming why", () => {
    const p = fixture('issue_comment.created.json');
    p.comment.user = { login: 'the-loop-app[bot]', type: 'Bot' };
    p.sender = p.comment.user;
    const r = route('issue_comment', p);
    expect(r.action).toBe('ignore');
    expect(r.action === 'ignore' && r.reason).toContain('our own comment');
  });

  it("a comment performed via our App is ignored, whoever it is attributed to; another App's is not", () => {
    const p = fixture('issue_comment.created.json');
    p.comment.performed_via_github_app = { id: 4242, slug: 'the-loop-app' };
    expect(route('issue_comment', p).action).toBe('ignore');
    p.comment.performed_via_github_app = { id: 7, slug: 'other' };
    expect(route('issue_comment', p).action).toBe('deliver');
  });

  it('a comment carrying our hidden marker is ignored (even from a person, even with no identity known)', () => {
    const p = fixture('issue_comment.created.json');
    p.comment.body = `@the-loop go\n${STATUS_MARKER_PREFIX} delivery=x -->`;
    const r = routeEvent('issue_comment', p, config);
    expect(r.action).toBe('ignore');
    expect(r.action === 'ignore' && r.reason).toContain('marker');
  });

  it('closing still closes the session when our bot closed the issue', () => {
    const p = fixture('issues.closed.json');
    p.sender = { login: 'the-loop-app[bot]', type: 'Bot' };
    expect(route('issues', p).action).toBe('close');
  });

  it('logins compare without case, as GitHub does', () => {
    const p = fixture('issue_comment.created.json');
    p.comment.user = { login: 'THE-LOOP-APP[bot]', type: 'Bot' };
    expect(route('issue_comment', p).action).toBe('ignore');
  });
});

describe('who is told why a trigger was refused', () => {
  const onlyAlice: RoutingConfig = configSchema.parse({
    repos: { 'acme/widgets': { path: '/tmp/x' } },
    routing: { authorization: { users: ['alice'] } },
  });

  it('a member not in authorization.users has standing: the rejection carries where to answer', () => {
    const p = fixture('issue_comment.created.json');
    const r = route('issue_comment', p, onlyAlice);
    expect(r.action).toBe('reject');
    expect(r.action === 'reject' && r.answer?.number).toBe(p.issue.number);
  });

  it('an outsider (association NONE) and a bot are never answered', () => {
    const p = fixture('issue_comment.created.json');
    p.comment.author_association = 'NONE';
    const r = route('issue_comment', p);
    expect(r.action).toBe('reject');
    expect(r.action === 'reject' && r.answer).toBeUndefined();
    const b = fixture('issue_comment.created.json');
    b.comment.user = { login: 'dependabot[bot]', type: 'Bot' };
    const rb = route('issue_comment', b);
    expect(rb.action).toBe('reject');
    expect(rb.action === 'reject' && rb.answer).toBeUndefined();
  });

  it('a config letting CONTRIBUTORs trigger does not make them people the bot answers', () => {
    const wide: RoutingConfig = configSchema.parse({
      repos: { 'acme/widgets': { path: '/tmp/x' } },
      routing: {
        authorization: { users: ['alice'], authorAssociations: ['OWNER', 'MEMBER', 'CONTRIBUTOR'] },
      },
    });
    const p = fixture('issue_comment.created.json');
    p.comment.author_association = 'CONTRIBUTOR';
    const r = route('issue_comment', p, wide);
    expect(r.action).toBe('reject');
    expect(r.action === 'reject' && r.answer).toBeUndefined();
  });
});

describe('our marker counts only in the actor’s own words', () => {
  it("an issue body carrying it does not make a maintainer's trigger label ours", () => {
    const labels: RoutingConfig = configSchema.parse({
      repos: { 'acme/widgets': { path: '/tmp/x' } },
      routing: { triggers: { labels: ['the-loop'] } },
    });
    const p = fixture('issues.labeled.json');
    p.issue.body = `please <!-- the-loop:status delivery=x -->`;
    expect(route('issues', p, labels).action).toBe('start');
  });
});
