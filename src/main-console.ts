import { consolePort } from './config/console-schema.js';
import { loadOrCreateToken } from './console/auth.js';
import { removeConsoleFile, writeConsoleFile } from './console/console-file.js';
import type { ConsoleDeps } from './console/ports.js';
import { type ConsoleServer, startConsoleServer } from './console/server.js';
import { TerminalHub } from './console/terminal/hub.js';
import { actViews, eventViews, sessionDetail, sessionRows } from './console/views.js';
import { LoopError } from './core/errors.js';
import type { SessionRecord } from './core/ports/sessions.js';
import type { Dispatcher } from './dispatch/dispatcher.js';
import type { App } from './main.js';
import { tmuxClient } from './main-runners.js';
import { type ResumeOutcome, resumeHeld } from './sessions/resume.js';
import { handBack, takeOver } from './sessions/takeover.js';

/**
 * The browser console's part of the composition root: its listener, its terminal hub and the
 * functions it is given (views, resume, take over, hand back). Started by startDaemon when
 * `console.enabled`; stopped before the dispatcher's lock is released.
 */
export interface ConsoleHandle {
  server: ConsoleServer;
  stop(): Promise<void>;
}

export async function startConsole(app: App, dispatcher: Dispatcher): Promise<ConsoleHandle | undefined> {
  const { config, dataDir } = app.loaded;
  const c = config.console;
  if (!c.enabled) return undefined;
  const token = loadOrCreateToken(dataDir);
  // Never in a log line or a command's output, whatever form it takes there.
  app.scrubber.add(token);
  const terminals = new TerminalHub({
    tmux: tmuxClient(config.tmux.socket),
    logger: app.logger,
    // A take over or hand back from the CLI (another process) reaches the open terminals through this.
    takeoverOf: async (id) => {
      const session = await app.store.get(id);
      return session?.status === 'active' ? session.takeover : null;
    },
    limits: { perSession: c.maxViewersPerSession, total: c.maxViewers },
  });
  let server: ConsoleServer;
  try {
    server = await startConsoleServer({
      host: c.host,
      port: consolePort(c, config.server),
      publicOrigin: c.publicOrigin,
      allowedHosts: c.allowedHosts,
      sessionHours: c.sessionHours,
      token,
      logger: app.logger,
      deps: consoleDeps(app, dispatcher),
      terminals,
    });
  } catch (error) {
    await terminals.close();
    throw error;
  }
  writeConsoleFile(dataDir, { url: server.origin, pid: process.pid });
  app.logger.info('console listening', { url: server.url, origin: server.origin });
  return {
    server,
    stop: async () => {
      removeConsoleFile(dataDir, process.pid);
      await server.close();
      await terminals.close();
    },
  };
}

/** What the console server asks of the daemon, wired to the app's stores and the session rules. */
function consoleDeps(app: App, dispatcher: Dispatcher): ConsoleDeps {
  const known = async (id: string): Promise<SessionRecord> => {
    const session = await app.store.get(id);
    if (!session) throw new LoopError('session-missing', `no session ${id}`);
    return session;
  };
  return {
    // The console's costs are the ledger's (its store: the Ledger service only prices what it adds).
    sessionRows: () => sessionRows({ store: app.store, ledger: app.ledger.store }),
    sessionDetail: (id) => sessionDetail({ store: app.store, acts: app.acts, ledger: app.ledger.store }, id),
    turnEvents: (id, after, limit) => eventViews(app, id, after, limit),
    usage: (query) => app.ledger.store.report(query),
    acts: (filter) => actViews(app, filter),
    resume: async (id, raise) => resumeAnswer(await resumeHeld(app, await known(id), raise)),
    takeOver: async (id, who) => {
      const taken = await takeOver(app, await known(id), who, new Date());
      if (!taken.takeover) throw new LoopError('internal', `session ${id} was not taken over`);
      return taken.takeover;
    },
    handBack: async (id) => {
      await handBack(app, await known(id), new Date());
    },
    notifyDispatcher: () => dispatcher.notifySoon(),
    terminalOf: async (id) => {
      const session = await app.store.get(id);
      if (session?.status !== 'active' || !session.tmuxTarget) return undefined;
      return { target: session.tmuxTarget, takeover: session.takeover };
    },
  };
}

/** What a resume did, for the page (the session's own row follows on the live socket). */
function resumeAnswer(outcome: ResumeOutcome): Record<string, unknown> {
  if (outcome.kind === 'not-held') return { resumed: false, held: false };
  if (outcome.kind === 'released') return { resumed: true, released: outcome.released.kind };
  const { released, amount, again } = outcome;
  return {
    resumed: again === null,
    raised: { [released.dimension]: amount },
    stillHeld: again?.reason ?? null,
  };
}
