import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { DEFAULT_CONFIG_PATH } from '../config/load.js';
import { sandboxMode } from '../guard/prepare.js';
import { type App, type AppOptions, createApp, type Daemon, startDaemon } from '../main.js';
import { isChecking } from '../runners/runner.js';
import { detectBwrap } from '../sandbox/detect.js';
import { writeStarterConfig } from './config.js';
import { checkEngines } from './doctor.js';
import { EXIT, type Io } from './io.js';

type ServeOptions = AppOptions & {
  port?: number | undefined;
  host?: string | undefined;
  once?: boolean | undefined;
};

/**
 * `the-loop serve`: the daemon. On a fresh checkout with no config it writes the starter config
 * (with a generated webhook secret) first, so `npm start` just works. Runs until SIGINT/SIGTERM.
 */
export async function serveCommand(io: Io, options: ServeOptions): Promise<number> {
  writeStarterIfNone(io, options);
  // The daemon brings a shared store to its version, and on PostgreSQL its writes are fenced by
  // this host's leases; reading commands only check the version.
  const app = await createApp({ ...options, migrateStore: true, daemon: true });
  io.useScrubber?.(app.scrubber.scrub);
  for (const warning of app.loaded.warnings) io.err(`the-loop: warning: ${warning}\n`);
  try {
    if (options.port !== undefined) app.loaded.config.server.port = options.port;
    if (options.host !== undefined) app.loaded.config.server.host = options.host;
    await checkRunners(app);
    const daemon = await startDaemon(app);
    await printStatus(io, app, daemon);
    if (options.once) {
      // Started, checked and stopped: nothing waits for Ctrl-C.
      io.out('Ready; stopping (--once).\n');
      await daemon.stop(0);
      io.out('Stopped.\n');
      return EXIT.ok;
    }
    io.out('Ready. Ctrl-C stops (running turns get dispatch.closeGraceSeconds to finish).\n');
    await stopSignal(io);
    await daemon.stop();
    io.out('Stopped.\n');
    return EXIT.ok;
  } finally {
    app.dispose();
  }
}

/** No config given and none at the default path: the starter config is written there. */
function writeStarterIfNone(io: Io, options: ServeOptions): void {
  const explicit = options.configPath ?? io.env.THE_LOOP_CONFIG;
  const path = resolve(io.cwd, DEFAULT_CONFIG_PATH);
  if (explicit || existsSync(path)) return;
  const { gitignore } = writeStarterConfig(path);
  io.out(`No config found: wrote ${path} with a generated webhook secret (mode 0600).\n`);
  if (gitignore) io.out(`Wrote ${gitignore}: git ignores the config's directory.\n`);
}

/**
 * A daemon refuses to start without the tools of a runner its config may start sessions on (tmux):
 * no silent fallback to another runner.
 */
async function checkRunners(app: App): Promise<void> {
  const { config } = app.loaded;
  const names = new Set([
    config.defaults.runner,
    config.routing.runner,
    ...Object.values(config.repos).map((r) => r.runner),
  ]);
  for (const name of names) {
    const runner = name !== undefined && Object.hasOwn(app.runners, name) ? app.runners[name] : undefined;
    if (runner && isChecking(runner)) await runner.check();
  }
}

/** What the daemon listens on, guards with, and finds installed. */
async function printStatus(io: Io, app: App, daemon: Daemon): Promise<void> {
  const { loaded } = app;
  const repos = Object.keys(loaded.config.repos);
  io.out('the-loop daemon\n');
  io.out(`  webhook   ${daemon.webhookUrl}  (POST; content type application/json)\n`);
  io.out(`  health    ${daemon.server.url}/healthz\n`);
  io.out(
    daemon.console
      ? `  console   ${daemon.console.server.origin}  (log in: the-loop console)\n`
      : '  console   off (console.enabled: false)\n',
  );
  io.out(`  config    ${loaded.path ?? '(defaults)'}\n`);
  io.out(`  data dir  ${loaded.dataDir}\n`);
  io.out(`  secret    webhook.secret in the config (not shown)\n`);
  const gateway = app.guard.gateway.endpoint();
  io.out(
    `  gateway   ${gateway ? `${gateway.url} · gh socket ${gateway.socketPath ?? 'none'}` : 'off (gateway.enabled: false): engines hold their credentials'}\n`,
  );
  const sandbox = sandboxMode({
    config: loaded.config,
    bwrap: () => detectBwrap({ path: loaded.config.sandbox.bwrap, env: io.env }),
  });
  io.out(`  sandbox   ${sandbox.mode === 'bwrap' ? `bubblewrap (${sandbox.path})` : 'NONE'}\n`);
  // Said at every start, on stderr too: engines run with no sandbox.
  if (sandbox.note) io.err(`the-loop: warning: ${sandbox.note}\n`);
  io.out(
    `  repos     ${repos.length ? repos.join(', ') : 'none configured: every event will be rejected until you add repos:'}\n`,
  );
  printUsageWatch(io, app, daemon);
  await printEngines(io, app);
  const pending = (await app.inbox.pending()).length;
  if (pending) io.out(`  inbox     resuming ${pending} pending deliver${pending === 1 ? 'y' : 'ies'}\n`);
}

/** The transcript directories imported as they are written, and the usage.watch entries missing. */
function printUsageWatch(io: Io, app: App, daemon: Daemon): void {
  const { watching, missing, errors } = daemon.usage;
  io.out(
    watching.length > 0
      ? `  usage     transcripts imported as written from ${watching.join(', ')}\n`
      : '  usage     no transcript directory to watch (usage.watch, usage.watchClaude)\n',
  );
  const every = app.loaded.config.usage.recheckSeconds;
  for (const dir of missing)
    io.err(
      `the-loop: warning: usage.watch: ${dir} does not exist (yet): watched once it does (looked for every ${every} s)\n`,
    );
  for (const error of errors) io.err(`the-loop: warning: ${error}: not watched\n`);
}

/** The engines the config uses, found or missing. */
async function printEngines(io: Io, app: App): Promise<void> {
  const { loaded } = app;
  const engines = [
    ...new Set([
      loaded.config.defaults.engine,
      ...Object.values(loaded.config.repos).map(
        (r) => r.engine ?? loaded.config.routing.engine ?? loaded.config.defaults.engine,
      ),
    ]),
  ];
  const checks = await checkEngines(
    Object.fromEntries(
      engines
        .filter((e) => loaded.engines[e])
        .map((e) => [e, loaded.engines[e] as NonNullable<(typeof loaded.engines)[string]>]),
    ),
    io.env,
    io.cwd,
  );
  for (const c of checks) {
    io.out(
      `  engine    ${c.engine}: ${c.path ? `${c.version ?? 'found'} (${c.path})` : `MISSING — install: ${c.install ?? c.binary}`}\n`,
    );
  }
}

/** Until SIGINT or SIGTERM. */
function stopSignal(io: Io): Promise<void> {
  return new Promise<void>((resolvePromise) => {
    const stop = () => {
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
      io.out('Stopping…\n');
      resolvePromise();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
