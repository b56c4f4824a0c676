import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { DEFAULT_CONFIG_PATH } from '../config/load.js';
import { sandboxMode } from '../guard/prepare.js';
import { type AppOptions, createApp, startDaemon } from '../main.js';
import { detectBwrap } from '../sandbox/detect.js';
import { writeStarterConfig } from './config.js';
import { checkEngines } from './doctor.js';
import { EXIT, type Io } from './io.js';

/**
 * `the-loop serve`: the daemon. On a fresh checkout with no config it writes the starter config
 * (with a generated webhook secret) first, so `npm start` just works. Runs until SIGINT/SIGTERM.
 */
export async function serveCommand(
  io: Io,
  options: AppOptions & { port?: number | undefined; host?: string | undefined; once?: boolean | undefined },
): Promise<number> {
  const explicit = options.configPath ?? io.env.THE_LOOP_CONFIG;
  if (!explicit && !existsSync(resolve(io.cwd, DEFAULT_CONFIG_PATH))) {
    const path = resolve(io.cwd, DEFAULT_CONFIG_PATH);
    const { gitignore } = writeStarterConfig(path);
    io.out(`No config found: wrote ${path} with a generated webhook secret (mode 0600).\n`);
    if (gitignore) io.out(`Wrote ${gitignore}: git ignores the config's directory.\n`);
  }
  const app = createApp(options);
  io.useScrubber?.(app.scrubber.scrub);
  for (const warning of app.loaded.warnings) io.err(`the-loop: warning: ${warning}\n`);
  try {
    if (options.port !== undefined) app.loaded.config.server.port = options.port;
    if (options.host !== undefined) app.loaded.config.server.host = options.host;
    // A daemon that may start tmux sessions refuses to start without tmux (no silent fallback).
    const { config } = app.loaded;
    const usesTmux = [
      config.defaults.runner,
      config.routing.runner,
      ...Object.values(config.repos).map((r) => r.runner),
    ].includes('tmux');
    if (usesTmux) await app.runners.tmux?.check?.();
    const daemon = await startDaemon(app);
    const { loaded } = app;
    const repos = Object.keys(loaded.config.repos);
    io.out('the-loop daemon\n');
    io.out(`  webhook   ${daemon.webhookUrl}  (POST; content type application/json)\n`);
    io.out(`  health    ${daemon.server.url}/healthz\n`);
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
    const pending = app.inbox.pending().length;
    if (pending) io.out(`  inbox     resuming ${pending} pending deliver${pending === 1 ? 'y' : 'ies'}\n`);
    io.out('Ready. Ctrl-C stops (running turns get dispatch.closeGraceSeconds to finish).\n');
    if (options.once) {
      await daemon.stop(0);
      return EXIT.ok;
    }
    await new Promise<void>((resolvePromise) => {
      const stop = () => {
        process.removeListener('SIGINT', stop);
        process.removeListener('SIGTERM', stop);
        io.out('Stopping…\n');
        resolvePromise();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    await daemon.stop();
    io.out('Stopped.\n');
    return EXIT.ok;
  } finally {
    app.dispose();
  }
}
