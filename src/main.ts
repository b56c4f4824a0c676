import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ActStore, auditTurn } from './acts/audit.js';
import { readRefusals, sessionPolicyHook } from './acts/hook.js';
import type { LoadedConfig } from './config/load.js';
import { policyOf, repoOf } from './config/repos.js';
import type { BudgetStore } from './core/ports/budgets.js';
import type { Inbox } from './core/ports/inbox.js';
import type { SessionStore } from './core/ports/sessions.js';
import { Dispatcher, type DispatcherDeps } from './dispatch/dispatcher.js';
import { acquireLock, lockHeldError, lockPath } from './dispatch/lock.js';
import { dispatchWorkspaces } from './dispatch/workspaces.js';
import { webhookSecret } from './github/ingress.js';
import { routeEvent, routingDigest } from './github/route.js';
import { createSessionScrub } from './guard/session-scrub.js';
import { startRetention } from './inbox/retention-timer.js';
import { holdAfterTurn } from './ledger/budget-hold.js';
import type { Ledger } from './ledger/ledger.js';
import { TelemetryReceiver } from './ledger/otel-receiver.js';
import { loadSalt, payerOf } from './ledger/payer.js';
import type { Logger, SecretScrubber } from './log/logger.js';
import { type AppOptions, type Base, openBase } from './main-base.js';
import type { ConsoleHandle } from './main-console.js';
import { type DaemonGitHubSource, daemonGitHub } from './main-github-client.js';
import { createGuard, type Guard, revokingStore } from './main-guard.js';
import type { HostsHandle } from './main-hosts.js';
import { listenForWebhooks } from './main-listen.js';
import { createRunners } from './main-runners.js';
import type { Stores } from './main-store.js';
import { createUsageWatch, type UsageWatch, type UsageWatchStatus } from './main-watch.js';
import { adoptingRunners, type Runner } from './runners/runner.js';
import { SessionCarry } from './sessions/carry.js';
import { type LostTurn, reconcile, recoverLostTurns, stopOrphanEngines } from './sessions/recovery.js';
import { deliveryHold, endingTakeovers } from './sessions/takeover.js';
import { TurnService } from './sessions/turn-service.js';
import type { HttpServer } from './web/server.js';

/**
 * Composition root: the only place concrete adapters (SQLite, the process runner, the log file)
 * are wired to the core. Everything it creates is released by `dispose()`.
 */
export interface App {
  loaded: LoadedConfig;
  logger: Logger;
  scrubber: SecretScrubber;
  store: SessionStore;
  inbox: Inbox;
  ledger: Ledger;
  acts: ActStore;
  budgets: BudgetStore;
  /** Turns found lost when this app started (their engines may still run). */
  lostTurns: LostTurn[];
  runners: Record<string, Runner>;
  turns: TurnService;
  /** The OpenTelemetry meter's receiver (routes for the daemon's server, env for opted-in engines). */
  telemetry: TelemetryReceiver;
  /** The gateway, its tokens, and each turn's engine preparation (sandbox, permission mode). */
  guard: Guard;
  /** Transcripts imported as they are written (started by the daemon only). */
  usageWatch: UsageWatch;
  /** The store the ports are over (PostgreSQL: its hosts, and the daemon's lease keeper). */
  stores: Stores;
  /** What `startDaemon` was given to find installed binaries (the hosts' offer). */
  options: AppOptions;
  /** The daemon's GitHub credential (App or token); undefined: none configured. */
  github: DaemonGitHubSource | undefined;
  dispose(): void;
}

export type { AppOptions } from './main-base.js';
export { registryPath } from './main-base.js';

export async function createApp(options: AppOptions): Promise<App> {
  const base = await openBase(options);
  const { loaded, scrubber, logger, ledger, acts, budgets, sessions: registry } = base;
  const github = daemonGitHub(loaded, options.env, logger, (value) => scrubber.add(value));
  const guard = createGuard({
    github,
    loaded,
    env: options.env,
    tokenStore: base.tokenStore,
    store: registry,
    ledger,
    acts,
    budgets,
    logger,
    policyFor: (workItem) => policyOf(loaded.config, workItem),
  });
  // Every path that ends a session revokes its capability tokens and ends its take over.
  const store = endingTakeovers(revokingStore(registry, guard.tokens, logger), {
    ledger: ledger.store,
    logger,
  });
  const inbox = base.stores.inbox({ scrub: scrubber.scrub, mayHold: scrubber.mayHold });
  const runners = createRunners(loaded, logger, {
    env: options.env,
    sessionStatus: async (id) => (await registry.get(id))?.status,
  });
  // Their engines are stopped by whoever takes the dispatcher lock (recoverBeforeDispatch). On a
  // shared store no process recovers turns by this machine's process table: another host's running
  // turn would be marked lost, and this host's own (a restart after a crash) would be run again.
  // The lease reaper settles them instead: interrupted, never re-run by itself.
  const shared = base.stores.recovery === 'leases';
  const lostTurns = shared ? [] : await recoverLostTurns(store, adoptingRunners(runners), logger);
  const telemetry = new TelemetryReceiver({
    store: registry,
    ledger,
    logger,
    dataDir: loaded.dataDir,
    engines: loaded.engines,
    addSecret: (value) => scrubber.add(value),
  });
  const turns = createTurnService(options, base, { store, runners, telemetry, guard });
  return {
    guard,
    loaded,
    logger,
    scrubber,
    store,
    inbox,
    ledger,
    acts,
    budgets,
    lostTurns,
    runners,
    turns,
    telemetry,
    usageWatch: createUsageWatch(base, options),
    stores: base.stores,
    options,
    github,
    dispose: () => {
      github?.close();
      base.dispose();
    },
  };
}

/** On a store shared by several hosts: the carrier of process-runner sessions' conversation files. */
function sessionCarry(base: Base): SessionCarry | undefined {
  const { sessionFiles, hostId } = base.stores;
  if (!sessionFiles || hostId === undefined) return undefined;
  return new SessionCarry({ files: sessionFiles, host: hostId, scrub: base.scrubber.scrub });
}

/** The turn service, wired to the store, the runners, the ledger, the acts audit and the guard. */
function createTurnService(
  options: AppOptions,
  base: Base,
  deps: Pick<App, 'store' | 'runners' | 'telemetry' | 'guard'>,
): TurnService {
  const { loaded, scrubber, logger, ledger, acts, budgets } = base;
  const { store, runners, telemetry, guard } = deps;
  const { defaults, limits } = loaded.config;
  const policyFor = (workItem: string) => policyOf(loaded.config, workItem);
  const stateDir = (slug: string) => join(loaded.dataDir, 'sessions', slug);
  const scrubSession = createSessionScrub({ dataDir: loaded.dataDir, scrubber, logger });
  let salt: Buffer | undefined;
  return new TurnService({
    store,
    runners,
    engines: loaded.engines,
    defaults: {
      engine: defaults.engine,
      runner: defaults.runner,
      cwd: defaults.cwd ?? options.cwd,
      backstopMs: defaults.backstopSeconds * 1000,
      killGraceMs: defaults.killGraceSeconds * 1000,
      maxLineBytes: limits.maxLineBytes,
    },
    env: options.env,
    addSecret: (value) => scrubber.add(value),
    scrub: scrubber.scrub,
    logger,
    ledger,
    policyHook: (session, preset) =>
      sessionPolicyHook(preset.policyHook, () => ({
        dir: stateDir(session.slug),
        policy: policyFor(session.workItem),
        workspace: session.cwd,
        node: process.execPath,
        hookScript: fileURLToPath(new URL('../bin/the-loop-policy-hook.js', import.meta.url)),
      })),
    auditTurn: (session, turn, events) =>
      auditTurn(
        {
          acts,
          turns: store,
          ledger: ledger.store,
          policyFor,
          refusedIn: (s) => readRefusals(stateDir(s.slug)),
          holdForBreach: (id, hold) => store.setHold(id, hold),
          holdUnaccounted: (id, hold) => store.setHold(id, hold),
          scrub: scrubber.scrub,
          logger,
        },
        session,
        turn,
        events,
      ),
    afterTurn: async (session) => {
      // A key the model echoed is masked in the files its engine wrote, as in the registry.
      scrubSession(session.slug);
      await holdAfterTurn({ budgets, store, logger, loaded }, session);
    },
    payer: (credential, env) => {
      // Created on first use: a data dir that never ran a turn gets no salt file.
      salt ??= loadSalt(loaded.dataDir);
      return payerOf(credential, env, salt);
    },
    telemetry,
    // Several hosts: a process-runner session's conversation moves with it through the store.
    carry: sessionCarry(base),
    prepareEngine: (input) => guard.prepare(input),
    policyRefusals: (session) => readRefusals(stateDir(session.slug)),
  });
}

/**
 * What the dispatcher-lock holder does before it dispatches (sessions/recovery.ts): stop the engines
 * of turns lost when this app started, and settle sessions and turns nobody watched (`only`: one
 * work item's).
 */
export async function recoverBeforeDispatch(app: App, only?: string): Promise<void> {
  stopOrphanEngines(app.lostTurns, app.logger);
  // On a shared store a session's terminal may be on another host: one not found here is not gone
  // (its host's leases, and their reaper, say what is).
  if (app.stores.recovery === 'leases') return;
  await reconcile(
    {
      store: app.store,
      inbox: app.inbox,
      checkSession: (session) => app.turns.checkSession(session),
      adopting: adoptingRunners(app.runners),
      logger: app.logger,
    },
    only,
  );
}

/** A dispatcher over the app's inbox, store and turn service. */
export function createDispatcher(app: App, extra: Partial<DispatcherDeps> = {}): Dispatcher {
  const { config, dataDir } = app.loaded;
  const spaces = dispatchWorkspaces({
    dataDir,
    repoOf: (workItem) => repoOf(config, workItem),
    store: app.store,
    runners: app.runners,
    git: app.guard.git,
    logger: app.logger,
  });
  return new Dispatcher({
    inbox: app.inbox,
    store: app.store,
    runTurn: (request) => app.turns.runTurn(request),
    adoptTurn: (turn, request) => app.turns.adoptTurn(turn, request),
    heldReason: (workItem) => deliveryHold(app, workItem),
    checkSession: (session) => app.turns.checkSession(session),
    // Deliveries are routed on arrival; only rows an older version stored unrouted are routed here.
    routeLegacy: (event, payload) => routeEvent(event, payload, config),
    routingDigest: routingDigest(config),
    logger: app.logger,
    concurrency: config.dispatch.concurrency,
    closeGraceMs: config.dispatch.closeGraceSeconds * 1000,
    pollMs: config.dispatch.pollSeconds * 1000,
    workspace: spaces.workspace,
    onClose: spaces.onClose,
    // Several hosts (PostgreSQL, the daemon): only the work items this host holds.
    leases: app.stores.keeper,
    ...extra,
  });
}

export interface Daemon {
  server: HttpServer;
  dispatcher: Dispatcher;
  /** The browser console (undefined: console.enabled is false). */
  console: ConsoleHandle | undefined;
  /** The transcripts watched (usage.watch, Claude Code's projects folders). */
  usage: UsageWatchStatus;
  webhookUrl: string;
  stop(graceMs?: number): Promise<void>;
}

/** The daemon: webhook ingress and dispatcher, holding the dispatcher lock of the data dir. */
export async function startDaemon(app: App): Promise<Daemon> {
  const { config, dataDir } = app.loaded;
  const secret = webhookSecret(config.webhook);
  app.scrubber.add(secret);
  const lock = acquireLock(lockPath(dataDir), 'daemon');
  if ('heldBy' in lock) throw lockHeldError(lock.heldBy, dataDir);
  // What started is stopped again, in reverse, when a later step fails (the lock released last).
  const undo: Array<() => unknown> = [() => lock.release()];
  const unwind = async () => {
    for (const step of undo.reverse()) await step();
  };
  // What the daemon says on GitHub (loaded by the daemon only): the inbox it observes, its turns.
  const answers = await (await import('./main-github.js')).githubAnswers(app);
  const dispatcher = createDispatcher(app, answers.dispatcher);
  let server: HttpServer;
  let consoleHandle: ConsoleHandle | undefined;
  let usage: UsageWatchStatus;
  let hosts: HostsHandle | undefined;
  try {
    await recoverBeforeDispatch(app);
    server = await listenForWebhooks(app, dispatcher, secret, answers);
    const listening = server;
    undo.push(() => listening.close());
    app.telemetry.listenAt(server.url);
    undo.push(() => app.telemetry.listenAt(undefined));
    await app.guard.gateway.start();
    undo.push(() => app.guard.gateway.stop());
    hosts = await startHostsIfShared(app, dispatcher);
    undo.push(() => hosts?.stop());
    // Loaded by the daemon only (the console's server and ws): `the-loop run` and the other
    // commands that create the app never load them.
    const { startConsole } = await import('./main-console.js');
    consoleHandle = await startConsole(app, dispatcher);
    const started = consoleHandle;
    undo.push(() => started?.stop());
    await dispatcher.start();
    void answers.recover();
    usage = app.usageWatch.start();
    undo.push(() => app.usageWatch.stop());
  } catch (error) {
    await dispatcher.stop(0);
    await unwind();
    throw error;
  }
  const retention = startRetention({
    inbox: app.inbox,
    retainDays: config.inbox.retainDays,
    logger: app.logger,
  });
  // Rows recorded while their model had no price get one now if the price data knows it.
  const repriced = await app.ledger.repriceUnknown();
  if (repriced > 0) app.logger.info('ledger rows priced that were unknown', { rows: repriced });
  app.logger.info('daemon started', { url: server.url });
  return {
    server,
    dispatcher,
    console: consoleHandle,
    usage,
    webhookUrl: `${server.url}${config.webhook.path}`,
    stop: async (graceMs = config.dispatch.closeGraceSeconds * 1000) => {
      await retention.stop();
      await app.usageWatch.stop();
      // The dispatcher first: turns finishing in the grace period still export their telemetry
      // here (a webhook arriving meanwhile is stored, and runs after the next start).
      await dispatcher.stop(graceMs);
      // After the dispatcher: a turn the stop interrupted is said to run again, on GitHub too.
      await answers.stop(graceMs);
      await hosts?.stop();
      await consoleHandle?.stop();
      await server.close();
      await app.guard.gateway.stop();
      app.telemetry.listenAt(undefined);
      lock.release();
      app.logger.info('daemon stopped');
    },
  };
}

/** PostgreSQL: this host's lease keeper and LISTEN connection (loaded only then). */
async function startHostsIfShared(app: App, dispatcher: Dispatcher): Promise<HostsHandle | undefined> {
  if (!app.stores.keeper) return undefined;
  const { startHosts } = await import('./main-hosts.js');
  return startHosts(app, dispatcher, app.options.env, app.options.cwd);
}
