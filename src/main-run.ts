import type { TurnEvent } from './core/events.js';
import type { SessionRecord } from './core/ports/sessions.js';
import type { Dispatcher } from './dispatch/dispatcher.js';
import { type App, createDispatcher, recoverBeforeDispatch } from './main.js';
import { serverLimits } from './web/limits.js';
import { type HttpServer, startHttpServer } from './web/server.js';

/**
 * What `the-loop run` dispatches with when no daemon does (part of the composition root, beside
 * main.ts): recovery, its own telemetry receiver, the gateway and a dispatcher of its one work item.
 */
export interface RunDispatch {
  /** Stop dispatching (a running turn is cancelled at once). */
  stop(): Promise<void>;
  /** Resolves when nothing runs and nothing runnable is queued (the delivery settled, or waits on a hold). */
  idle(): Promise<void>;
  /** Stop dispatching, then the telemetry receiver and the gateway. */
  close(): Promise<void>;
}

/**
 * Only this work item, and nothing that arrived after this delivery: later deliveries are left for
 * whoever dispatches next, so stopping here never cancels someone else's turn. Call it holding the
 * dispatcher lock; what it started is stopped again when it throws.
 */
export async function startRunDispatch(
  app: App,
  input: {
    workItem: string;
    deliveryId: string;
    onEvent: (event: TurnEvent) => void;
    onSession: (session: SessionRecord, created: boolean) => void;
    /** Where the turn is expected to run (its workspace's git dirs are asked at once). */
    cwd?: string | undefined;
  },
): Promise<RunDispatch> {
  let receiver: HttpServer | undefined;
  let dispatcher: Dispatcher | undefined;
  const close = async () => {
    await dispatcher?.stop(0);
    await receiver?.close();
    app.telemetry.listenAt(undefined);
    await app.guard.gateway.stop();
  };
  // The once-per-process probes of the guard run while recovery, the gateway and the first claim do.
  void app.guard.warm();
  try {
    await recoverBeforeDispatch(app, input.workItem);
    // The workspace's git dirs only now: recovery stops orphaned engines, which could still change
    // .git meanwhile; they are asked while the gateway starts.
    void app.guard.warm({ cwd: input.cwd });
    receiver = await startRunReceiver(app);
    await app.guard.gateway.start();
    const running = createDispatcher(app, {
      only: input.workItem,
      upTo: input.deliveryId,
      onEvent: input.onEvent,
      onSession: input.onSession,
      pollMs: 100,
      // An adopted turn's engine runs on in the workspace: what was asked of its .git is stale.
      adoptTurn: (turn, request) => {
        app.guard.forgetWarmed();
        return app.turns.adoptTurn(turn, request);
      },
    });
    dispatcher = running;
    await running.start();
    return { stop: () => running.stop(0), idle: () => running.idle(), close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * Without a daemon, `run` receives the OpenTelemetry of engines that opt in itself, on the loopback:
 * at the configured port when it is free (where a TUI left running keeps exporting to the daemon
 * started later), else on any free port.
 */
async function startRunReceiver(app: App): Promise<HttpServer | undefined> {
  if (!Object.values(app.loaded.engines).some((e) => e.otel?.enabled)) return undefined;
  const start = (port: number) =>
    startHttpServer({
      host: '127.0.0.1',
      port,
      routes: app.telemetry.routes(),
      logger: app.logger,
      limits: serverLimits(app.loaded.config.server),
    });
  let server: HttpServer;
  try {
    server = await start(app.loaded.config.server.port);
  } catch {
    server = await start(0);
  }
  app.telemetry.listenAt(server.url);
  return server;
}
