import type { CredentialsConfig } from '../config/gateway-schema.js';
import type { GitHubConfig } from '../config/github-schema.js';
import { githubSecretValues } from '../config/github-secrets.js';
import type { CredentialKind } from '../core/credential.js';
import type { EnginePreset } from '../engines/preset.js';
import type { ModelApi } from './types.js';

/**
 * Which real credential the gateway holds for an engine, and which variable of the engine's
 * environment carries the capability token in its place. Pure: the same config and environment give
 * the same answer in the process that builds the engine's environment and in the gateway that
 * swaps the token back.
 */
export interface HeldCredential {
  /** The real value (never leaves the daemon). */
  value: string;
  kind: CredentialKind;
  /** Where it came from: `credentials.<api>` or the daemon's variable. */
  source: string;
  /** The engine's variable that gets the capability token instead. */
  tokenEnv: string;
}

/** The model credential the gateway holds for this engine; undefined: none (the engine's own login passes through). */
export function modelCredential(
  preset: EnginePreset,
  env: Readonly<Record<string, string | undefined>>,
  credentials: CredentialsConfig,
): HeldCredential | undefined {
  const gw = preset.gateway;
  if (!gw) return undefined;
  const configured = credentials[gw.api as ModelApi];
  const firstApiKey = preset.credentials.find((c) => c.kind !== 'cloud')?.env;
  if (configured !== undefined) {
    const value = typeof configured === 'string' ? configured : configured.value;
    const kind = typeof configured === 'string' ? 'api-key' : configured.kind;
    // A subscription's token is sent as its engine sends an OAuth token; a key, as a key.
    const byKind = preset.credentials.find((c) => c.kind === kind && c.env !== 'ANTHROPIC_AUTH_TOKEN')?.env;
    const tokenEnv = gw.keyEnv ?? byKind ?? firstApiKey;
    if (!tokenEnv) return undefined;
    return { value, kind, source: `credentials.${gw.api}`, tokenEnv };
  }
  for (const c of preset.credentials) {
    const value = env[c.env];
    if (!value) continue;
    // Cloud credentials sign requests to another host (Bedrock, Vertex): the gateway cannot hold them.
    if (c.kind === 'cloud') return undefined;
    return { value, kind: c.kind, source: c.env, tokenEnv: gw.keyEnv ?? c.env };
  }
  return undefined;
}

/** The engine uses a cloud credential (Bedrock, Vertex): its requests do not go through the gateway. */
export function usesCloudCredential(
  preset: EnginePreset,
  env: Readonly<Record<string, string | undefined>>,
  credentials: CredentialsConfig,
): boolean {
  if (!preset.gateway || credentials[preset.gateway.api as ModelApi] !== undefined) return false;
  const first = preset.credentials.find((c) => env[c.env]);
  return first?.kind === 'cloud';
}

/** The GitHub token the gateway uses: `credentials.github`, else GH_TOKEN or GITHUB_TOKEN of the daemon. */
export function githubCredential(
  env: Readonly<Record<string, string | undefined>>,
  credentials: CredentialsConfig,
): { value: string; source: string } | undefined {
  if (credentials.github) return { value: credentials.github, source: 'credentials.github' };
  for (const name of ['GH_TOKEN', 'GITHUB_TOKEN']) {
    const value = env[name];
    if (value) return { value, source: name };
  }
  return undefined;
}

/** The gateway holds a GitHub credential: the App's installation tokens, `github.token`, or the token above. */
export function holdsGitHubCredential(
  config: { github: GitHubConfig; credentials: CredentialsConfig },
  env: Readonly<Record<string, string | undefined>>,
): boolean {
  return (
    config.github.app !== undefined ||
    config.github.token !== undefined ||
    githubCredential(env, config.credentials) !== undefined
  );
}

/** GitHub's URLs as the gateway reaches them, from `gateway.github`. */
export function githubUrls(github: { host: string; url?: string | undefined; apiUrl?: string | undefined }): {
  host: string;
  gitUrl: string;
  apiUrl: string;
} {
  const host = github.host.toLowerCase();
  const apiDefault = host === 'github.com' ? 'https://api.github.com' : `https://${host}/api/v3`;
  return { host, gitUrl: github.url ?? `https://${host}`, apiUrl: github.apiUrl ?? apiDefault };
}

/**
 * Every credential value this config and environment can hand an engine or hold at the gateway: each
 * engine's credential variables (from its preset's env or the daemon's), the model credentials and
 * the GitHub token, and `github:`'s token and App key. Every command registers them with its scrubber, so one that only reads the
 * registry (`sessions show`) masks what the daemon masked.
 */
export function credentialValues(
  engines: Readonly<Record<string, EnginePreset>>,
  env: Readonly<Record<string, string | undefined>>,
  credentials: CredentialsConfig,
  github?: GitHubConfig,
): string[] {
  const values = new Set<string>();
  for (const preset of Object.values(engines)) {
    for (const c of preset.credentials) {
      const value = preset.env[c.env] ?? env[c.env];
      if (value) values.add(value);
    }
  }
  for (const configured of Object.values(credentials)) {
    const value = typeof configured === 'string' ? configured : configured?.value;
    if (value) values.add(value);
  }
  const token = githubCredential(env, credentials)?.value;
  if (token) values.add(token);
  for (const value of githubSecretValues(github)) values.add(value);
  return [...values];
}
