import type { App } from '../main.js';
import { checkEngines } from './doctor.js';
import { EXIT, type Io } from './io.js';

/**
 * `the-loop serve`. The webhook ingress and dispatcher arrive with the next milestone; for now the
 * daemon entry validates its configuration, opens the registry, reports what is missing, and exits.
 */
export async function serveCommand(app: App, io: Io): Promise<number> {
  const { loaded } = app;
  const active = app.store.list({ status: 'active' }).length;
  io.out('the-loop daemon\n');
  io.out(`  config    ${loaded.path ?? '(none; defaults)'}\n`);
  io.out(`  data dir  ${loaded.dataDir}\n`);
  io.out(`  registry  ${active} active session(s)\n`);
  const checks = await checkEngines(
    { [loaded.config.defaults.engine]: loaded.engines[loaded.config.defaults.engine] as never },
    io.env,
    io.cwd,
  );
  for (const c of checks) {
    io.out(
      `  engine    ${c.engine}: ${c.path ? `${c.version ?? 'found'} (${c.path})` : `missing — install: ${c.install ?? c.binary}`}\n`,
    );
  }
  io.out('  webhooks  not served yet: this build runs turns by hand with `the-loop run`.\n');
  app.logger.info('serve: status printed', { activeSessions: active });
  return EXIT.ok;
}
