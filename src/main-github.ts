import type { TurnEvent } from './core/events.js';
import type { GitHubWrites } from './core/ports/github.js';
import type { Inbox, RoutedDelivery } from './core/ports/inbox.js';
import type { DispatcherDeps } from './dispatch/dispatcher-deps.js';
import { type OwnIdentity, routeEvent } from './github/route.js';
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
  const routeLegacy = (event: string, payload: unknown) =>
    routeEvent(event, payload, config, undefined, self);
  // Only a credential given for it speaks on GitHub: a GH_TOKEN in the daemon's environment is
  // often a person's own, and answering as them would also make their own triggers "ours".
  const explicit = config.github.app !== undefined || config.github.token !== undefined;
  const github = app.github && explicit ? await app.github.client() : undefined;
  if (!github) {
    app.logger.info('GitHub status is off: no github.app or github.token configured (docs/github.md)');
    return {
      inbox: app.inbox,
      dispatcher: { routeLegacy },
      self,
      recover: async () => {},
      stop: async () => {},
    };
  }
  const learning = learnIdentity(app, github, self);
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
    routeLegacy,
    runTurn: (request) =>
      app.turns.runTurn({ ...request, onEvent: follow(request.deliveryId, request.onEvent) }),
    adoptTurn: (turn, request) =>
      app.turns.adoptTurn(turn, { ...request, onEvent: follow(turn.deliveryId, request.onEvent) }),
  };
  return {
    inbox,
    dispatcher,
    self,
    recover: () => recoverSoon(app, tracker),
    stop: async (graceMs) => {
      learning.stop();
      await tracker.stop(graceMs);
    },
  };
}

/**
 * Who we are, asked of GitHub until it answers (every 30 s): until then only our marker and the
 * configured App id and bot login say what is ours. In token mode the token's user is "us": the
 * log says so, for a person who gave their own token.
 */
function learnIdentity(app: App, github: GitHubWrites, self: OwnIdentity): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const ask = () => {
    github
      .identity()
      .then((id) => {
        if (stopped) return;
        if (id.login === undefined && id.appId === undefined) throw new Error('GitHub did not say');
        self.login ??= id.login;
        self.appId ??= id.appId;
        app.logger.info('answering on GitHub as', {
          login: self.login,
          appId: self.appId,
          mode: github.mode,
        });
        if (github.mode === 'token')
          app.logger.warn(
            'events by this login are our own and never start work: give the-loop its own bot account',
            {
              login: self.login,
            },
          );
      })
      .catch((error: unknown) => {
        if (stopped) return;
        app.logger.warn('could not learn who we are on GitHub; asking again in 30 s', { error });
        timer = setTimeout(ask, 30_000);
        timer.unref();
      });
  };
  ask();
  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** recover() after a start; a store failure is logged and tried again (never an unhandled rejection). */
async function recoverSoon(app: App, tracker: StatusTracker, attempt = 1): Promise<void> {
  try {
    const n = await tracker.recover();
    if (n > 0) app.logger.info('GitHub status: finishing what an earlier daemon left', { deliveries: n });
  } catch (error) {
    app.logger.warn('GitHub status: could not read what is left to say; trying again', { error, attempt });
    if (attempt < 5) setTimeout(() => void recoverSoon(app, tracker, attempt + 1), 10_000 * attempt).unref();
  }
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
      // Elapsed time alone is worth an edit every five minutes (GitHub's hourly write budget).
      tickMs: Math.max(300_000, status.editIntervalSeconds * 1000),
      checkName: status.checkName,
    },
    logger: app.logger,
  });
}
