import type { TurnEvent } from './core/events.js';
import type { GitHubWrites } from './core/ports/github.js';
import type { Inbox, RoutedDelivery } from './core/ports/inbox.js';
import type { DispatcherDeps } from './dispatch/dispatcher-deps.js';
import type { OwnIdentity } from './github/route.js';
import type { App } from './main.js';
import { gatherFacts } from './status/gather.js';
import { observedInbox } from './status/observe.js';
import { renderStatus } from './status/render.js';
import { TodoTracker, todosFrom } from './status/todos.js';
import { StatusTracker } from './status/tracker.js';

/**
 * The daemon's answers on GitHub (issue 18), wired: the tracker over the app's stores and GitHub
 * client, the inbox it observes, the turn events it follows, and who we are on GitHub (our own
 * events never trigger). Absent when no GitHub credential is configured: the daemon runs the same,
 * silent on GitHub, and says so once at start.
 */
export interface GitHubAnswers {
  /** The inbox the ingress and the dispatcher write through (observed by the tracker). */
  inbox: Inbox;
  /** The dispatcher's turn runners, following each turn's events for its delivery. */
  dispatcher: Partial<DispatcherDeps>;
  /** Who we are: read by the router on every delivery (filled in when GitHub answers). */
  self: OwnIdentity;
  /** Finish what an earlier daemon left unsaid (after the dispatcher started). */
  recover(): Promise<void>;
  stop(graceMs: number): Promise<void>;
}

/** A GitHub client for the daemon: the writes, and the installations payloads name. */
type DaemonGitHub = GitHubWrites & { noteInstallation(repository: string, installationId: number): void };

/** Throws (config-invalid) when the App's key does not parse: the daemon does not start. */
export async function githubAnswers(app: App): Promise<GitHubAnswers> {
  const { config } = app.loaded;
  const self: OwnIdentity = { login: config.github.botLogin, appId: config.github.app?.id };
  const github = app.github ? await app.github.client() : undefined;
  if (!github) {
    app.logger.info('GitHub status is off: no github.app or GitHub token configured (docs/github.md)');
    return { inbox: app.inbox, dispatcher: {}, self, recover: async () => {}, stop: async () => {} };
  }
  github
    .identity()
    .then((id) => {
      self.login ??= id.login;
      self.appId ??= id.appId;
      app.logger.info('answering on GitHub as', { login: self.login, appId: self.appId, mode: github.mode });
    })
    .catch((error: unknown) => app.logger.warn('could not learn who we are on GitHub', { error }));
  const tracker = createTracker(app, github);
  const inbox = observedInbox(app.inbox, {
    arrived: (id, routed) => {
      noteInstallation(github, routed);
      tracker.arrived(id, routed);
    },
    changed: (id) => tracker.changed(id),
    workItemChanged: (workItem) => tracker.workItemChanged(workItem),
  });
  const follow =
    (deliveryId: string | null | undefined, next: ((e: TurnEvent) => void) | undefined) => (e: TurnEvent) => {
      if (deliveryId) tracker.event(deliveryId, e);
      next?.(e);
    };
  const dispatcher: Partial<DispatcherDeps> = {
    inbox,
    runTurn: (request) =>
      app.turns.runTurn({ ...request, onEvent: follow(request.deliveryId, request.onEvent) }),
    adoptTurn: (turn, request) =>
      app.turns.adoptTurn(turn, { ...request, onEvent: follow(turn.deliveryId, request.onEvent) }),
  };
  return {
    inbox,
    dispatcher,
    self,
    recover: async () => {
      const n = await tracker.recover();
      if (n > 0) app.logger.info('GitHub status: finishing what an earlier daemon left', { deliveries: n });
    },
    stop: (graceMs) => tracker.stop(graceMs),
  };
}

function noteInstallation(github: DaemonGitHub, routed: RoutedDelivery): void {
  const answer = 'answer' in routed ? routed.answer : undefined;
  if (answer?.installationId !== undefined) github.noteInstallation(answer.repository, answer.installationId);
}

function createTracker(app: App, github: GitHubWrites): StatusTracker {
  const { config } = app.loaded;
  const status = config.github.status;
  return new StatusTracker({
    github,
    store: app.stores.githubStatus,
    gather: (id, live) =>
      gatherFacts(
        {
          inbox: app.inbox,
          sessions: app.store,
          acts: app.acts,
          turnCost: async (sessionId, turnId) =>
            (await app.ledger.store.sessionCosts([sessionId])).get(sessionId)?.turns.get(turnId),
          turnTodos: async (turnId) =>
            todosFrom((await app.store.events(turnId, { last: 500 })).map((e) => e.event)),
          consoleOrigin: config.console.publicOrigin,
          now: Date.now,
        },
        id,
        live,
      ),
    answerOf: async (id) => (await app.inbox.plan(id))?.answer,
    queuedOf: async (workItem) =>
      (await app.inbox.list({ workItem, status: 'queued', limit: 200 })).map((d) => d.id),
    render: (facts) => renderStatus(facts, { scrub: app.scrubber.scrub, checkName: status.checkName }),
    followTodos: () => new TodoTracker(),
    settings: {
      reactions: status.reactions,
      comments: status.comments,
      checks: status.checks,
      replyToRejections: status.replyToRejections,
      editIntervalMs: status.editIntervalSeconds * 1000,
      tickMs: Math.max(60_000, status.editIntervalSeconds * 1000),
      checkName: status.checkName,
    },
    logger: app.logger,
  });
}
