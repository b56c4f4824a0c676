import { execFile } from 'node:child_process';
import type { Config } from '../config/schema.js';
import { capabilitiesOf } from '../engines/capabilities.js';
import type { EnginePreset } from '../engines/preset.js';
import { whichBinary } from '../engines/which.js';
import { tmuxClient } from '../main-runners.js';
import { formatGuardReport, guardReport } from './doctor-guard.js';
import { formatStateReport, type StatePaths, stateReport } from './doctor-state.js';
import { table } from './format.js';
import { EXIT, type Io } from './io.js';

export const TMUX_INSTALL =
  'install tmux ≥ 3.2: `apt-get install tmux` (Debian/Ubuntu), `dnf install tmux` (Fedora), `brew install tmux` (macOS)';

export interface EngineCheck {
  engine: string;
  binary: string;
  path: string | null;
  version: string | null;
  error: string | null;
  install: string | null;
  capabilities: ReturnType<typeof capabilitiesOf>;
}

const VERSION_TIMEOUT_MS = 15_000;

function runVersion(
  path: string,
  args: string[],
  env: Record<string, string | undefined>,
): Promise<{ version: string | null; error: string | null }> {
  return new Promise((resolve) => {
    execFile(
      path,
      args,
      { timeout: VERSION_TIMEOUT_MS, env, maxBuffer: 1024 * 1024 },
      (error, stdout, stderr) => {
        const text = `${stdout}`.trim() || `${stderr}`.trim();
        const first = text.split('\n')[0]?.trim() ?? '';
        if (error && !first)
          resolve({
            version: null,
            error: error.killed ? 'timed out' : (error.message.split('\n')[0] ?? 'failed'),
          });
        else resolve({ version: first.slice(0, 120) || null, error: error ? `exit ${error.code}` : null });
      },
    );
  });
}

/** Which engine binaries exist, their versions, and how to install the missing ones. */
export async function checkEngines(
  engines: Record<string, EnginePreset>,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): Promise<EngineCheck[]> {
  // --version must not trigger network or first-run behaviour; run it with a plain environment.
  const versionEnv = { PATH: env.PATH, HOME: env.HOME, LANG: env.LANG, NO_COLOR: '1' };
  return Promise.all(
    Object.entries(engines).map(async ([engine, preset]) => {
      const path = whichBinary(preset.binary, env.PATH, cwd);
      const base = {
        engine,
        binary: preset.binary,
        path,
        install: preset.install ?? null,
        capabilities: capabilitiesOf(preset),
      };
      if (!path) return { ...base, version: null, error: 'not found on PATH' };
      return { ...base, ...(await runVersion(path, preset.versionArgs, versionEnv)) };
    }),
  );
}

export async function doctorCommand(
  engines: Record<string, EnginePreset>,
  defaultEngine: string,
  io: Io,
  options: { json?: boolean },
  config?: Config,
  paths?: StatePaths,
): Promise<number> {
  const checks = await checkEngines(engines, io.env, io.cwd);
  const guard = config ? guardReport(config, engines, io.env) : undefined;
  const state = paths ? await stateReport(paths, io.env) : undefined;
  const nodeOk = Number(process.versions.node.split('.')[0]) >= 20;
  const defaultFound = checks.find((c) => c.engine === defaultEngine)?.path != null;
  const tmuxVersion = await tmuxClient().version();
  const tmux = {
    version: tmuxVersion?.text ?? null,
    ok:
      tmuxVersion !== null && (tmuxVersion.major > 3 || (tmuxVersion.major === 3 && tmuxVersion.minor >= 2)),
    install: TMUX_INSTALL,
  };
  if (options.json) {
    io.out(
      `${JSON.stringify({ node: process.versions.node, nodeOk, defaultEngine, defaultFound, tmux, engines: checks, guard, state }, null, 2)}\n`,
    );
    return defaultFound && nodeOk ? EXIT.ok : EXIT.failed;
  }
  io.out(`Node.js ${process.versions.node} ${nodeOk ? '✓' : '✗ (the-loop needs Node.js 20 or newer)'}\n`);
  io.out(
    `tmux    ${tmux.version ? `${tmux.version} ${tmux.ok ? '✓' : '✗ (the tmux runner needs 3.2 or newer)'}` : `missing (only needed for the tmux runner) — ${TMUX_INSTALL}`}\n\n`,
  );
  io.out(
    table(
      ['ENGINE', 'STATUS', 'VERSION / PROBLEM', 'RESUME', 'METER'],
      checks.map((c) => [
        c.engine + (c.engine === defaultEngine ? ' (default)' : ''),
        c.path ? (c.error ? 'found, failed' : 'ok') : 'missing',
        c.path ? (c.version ?? c.error ?? '') : (c.error ?? ''),
        c.capabilities.resume ? 'yes' : 'no',
        c.capabilities.meter === 'none' ? 'unmetered' : c.capabilities.meter,
      ]),
    ),
  );
  if (guard) io.out(`\n${formatGuardReport(guard)}`);
  if (state) io.out(`\n${formatStateReport(state)}`);
  const missing = checks.filter((c) => !c.path);
  if (missing.length) {
    io.out('\nTo install the missing engines:\n');
    for (const c of missing)
      io.out(
        `  ${c.engine}: ${c.install ?? `put \`${c.binary}\` on PATH, or set engines.${c.engine}.binary`}\n`,
      );
  }
  if (!defaultFound)
    io.out(
      `\nThe default engine (${defaultEngine}) is missing: \`the-loop run\` will fail until it is installed.\n`,
    );
  return defaultFound && nodeOk ? EXIT.ok : EXIT.failed;
}
