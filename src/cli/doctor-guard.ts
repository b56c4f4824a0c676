import { stateHome } from '../config/data-dir.js';
import type { Config } from '../config/schema.js';
import { buildEngineEnv } from '../engines/env.js';
import type { EnginePreset } from '../engines/preset.js';
import { githubCredential, modelCredential, usesCloudCredential } from '../gateway/credentials.js';
import { permissionModeOf } from '../gateway/engine-env.js';
import { sandboxMode } from '../guard/prepare.js';
import { detectBwrap } from '../sandbox/detect.js';
import { probeCacheDir } from '../sandbox/probe-cache.js';

/**
 * What `doctor` says of what guards engines: which sandbox applies, whether the gateway serves,
 * each credential by kind and where it is held (never its value), and each engine's permission mode.
 */
export interface GuardReport {
  sandbox: { mode: 'bwrap' | 'none'; path: string | null; note: string | null };
  gateway: { enabled: boolean; listen: string; github: { token: string | null } };
  engines: Array<{
    engine: string;
    credential: { kind: string; source: string; held: 'gateway' | 'engine' } | null;
    permissions: 'bypass' | 'default';
    modelThroughGateway: boolean;
  }>;
}

export function guardReport(
  config: Config,
  engines: Record<string, EnginePreset>,
  env: Readonly<Record<string, string | undefined>>,
): GuardReport {
  let sandbox: GuardReport['sandbox'];
  try {
    // Probed afresh: its answer replaces the kept one (a failure deletes it, healing a stale entry).
    const bwrap = () =>
      detectBwrap({
        path: config.sandbox.bwrap,
        env,
        fresh: true,
        cacheDir: probeCacheDir(stateHome(env), env),
      });
    const s = sandboxMode({ config, bwrap });
    sandbox = { mode: s.mode, path: s.path ?? null, note: s.note ?? null };
  } catch (error) {
    sandbox = { mode: 'none', path: null, note: error instanceof Error ? error.message : String(error) };
  }
  const gw = config.gateway;
  const github = githubCredential(env, config.credentials);
  return {
    sandbox,
    gateway: {
      enabled: gw.enabled,
      listen: `${gw.host}:${gw.port}`,
      github: { token: githubHeld(config, github) },
    },
    engines: Object.entries(engines).map(([engine, preset]) => {
      const cloud = usesCloudCredential(preset, env, config.credentials);
      const served = gw.enabled && preset.gateway !== undefined && !cloud;
      const held = served ? modelCredential(preset, env, config.credentials) : undefined;
      const own = buildEngineEnv(preset, env).credential;
      const credential = held
        ? { kind: held.kind, source: held.source, held: 'gateway' as const }
        : own
          ? { kind: own.kind, source: own.env, held: 'engine' as const }
          : null;
      return {
        engine,
        credential,
        permissions: permissionModeOf(preset, sandbox.mode, gw.enabled && !cloud),
        // Only a key the gateway holds puts the model API behind it.
        modelThroughGateway: held !== undefined,
      };
    }),
  };
}

export function formatGuardReport(report: GuardReport): string {
  const lines = [
    `sandbox  ${report.sandbox.mode === 'bwrap' ? `bubblewrap ✓ (${report.sandbox.path})` : `NONE — ${report.sandbox.note ?? ''}`}`,
    `gateway  ${report.gateway.enabled ? `on, ${report.gateway.listen}` : 'off: engines hold their own credentials'}${report.gateway.enabled ? ` · GitHub: ${report.gateway.github.token ?? 'no token (GH_TOKEN, GITHUB_TOKEN or credentials.github): pushes and API writes will fail upstream'}` : ''}`,
    '',
    'Credentials and permissions, per engine (kinds only, never values):',
  ];
  for (const e of report.engines) {
    const cred = e.credential
      ? `${e.credential.kind} (${e.credential.source}) ${e.credential.held === 'gateway' ? 'held by the gateway' : "in the engine's environment"}`
      : 'none found (the engine uses its own login, if any)';
    lines.push(
      `  ${e.engine.padEnd(13)} ${cred} · permissions ${e.permissions}${e.modelThroughGateway ? ' · model API through the gateway' : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** What the gateway sends GitHub, by kind and source, never by value. */
function githubHeld(config: Config, fallback: { source: string } | undefined): string | null {
  if (config.github.app) return `GitHub App ${config.github.app.id} (installation tokens)`;
  if (config.github.token) return 'token (github.token)';
  return fallback ? `token (${fallback.source})` : null;
}
