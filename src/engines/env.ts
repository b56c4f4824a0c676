import type { CredentialKind } from '../core/credential.js';
import type { EnginePreset } from './preset.js';

/**
 * Variables every engine gets from the daemon's environment. Nothing else passes unless the preset
 * lists it: the daemon's own secrets (webhook secret, tokens for other engines) never reach an engine.
 */
export const BASE_ENV_ALLOW = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TERM',
  'COLORTERM',
  'TMPDIR',
  'TZ',
  'XDG_CONFIG_HOME',
  'XDG_DATA_HOME',
  'XDG_CACHE_HOME',
  'XDG_STATE_HOME',
  'XDG_RUNTIME_DIR',
];

export interface ResolvedCredential {
  env: string;
  kind: CredentialKind;
}

export interface EngineEnv {
  env: Record<string, string>;
  /** Values that must never appear anywhere but this environment (register them with the scrubber). */
  secretValues: string[];
  /** The credential the engine will use, by kind and variable name, never by value. */
  credential: ResolvedCredential | null;
}

/**
 * Build an engine's environment: the base allow-list, `LC_*`, the preset's pass-through and
 * credential variables from `source`, then the preset's fixed `env` (already resolved from config).
 * Pure: `source` is passed in.
 */
export function buildEngineEnv(
  preset: EnginePreset,
  source: Readonly<Record<string, string | undefined>>,
): EngineEnv {
  const env: Record<string, string> = {};
  const pass = new Set([...BASE_ENV_ALLOW, ...preset.passEnv, ...preset.credentials.map((c) => c.env)]);
  for (const [key, value] of Object.entries(source)) {
    if (value === undefined) continue;
    if (pass.has(key) || key.startsWith('LC_')) env[key] = value;
  }
  for (const [key, value] of Object.entries(preset.env)) env[key] = value;
  const secretValues: string[] = [];
  let credential: ResolvedCredential | null = null;
  for (const cred of preset.credentials) {
    const value = env[cred.env];
    if (!value) continue;
    secretValues.push(value);
    credential ??= { env: cred.env, kind: cred.kind };
  }
  return { env, secretValues, credential };
}
