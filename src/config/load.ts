import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { LoopError } from '../core/errors.js';
import { ENV_NAME, type EnginePreset, presetSchema } from '../engines/preset.js';
import { BUILTIN_PRESETS } from '../engines/presets.js';
import { type ConfigFile, readConfigText } from './config-file.js';
import { applyConsoleAlias } from './console-schema.js';
import type { LoadedConfig, LoadOptions } from './load-types.js';
import { placePaths } from './place.js';
import { checkRepoKeys } from './repos.js';
import { type Config, configSchema, type EngineOverride } from './schema.js';
import { secretParts } from './secret-parts.js';

export { DEFAULT_CONFIG_PATH } from './config-file.js';

export type { LoadedConfig, LoadOptions } from './load-types.js';

type Path = ReadonlyArray<PropertyKey>;
const formatPath = (path: Path): string =>
  path.length === 0
    ? '(top level)'
    : path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('');

export function formatIssues(issues: readonly z.core.$ZodIssue[], prefix: Path = []): string[] {
  return issues.map((issue) => {
    // A bad record key nests its reason (e.g. an engine name that breaks the naming rule).
    const nested = issue.code === 'invalid_key' ? issue.issues.map((inner) => inner.message).join('; ') : '';
    return `${formatPath([...prefix, ...issue.path])}: ${issue.message}${nested ? `: ${nested}` : ''}`;
  });
}

/** The store URL's password parts, when `path` is the store's URL (for the literal-secret check). */
const urlPassword = (path: Path, value: string): string[] =>
  path[0] === 'store' ? secretParts(value).slice(1) : [];

/**
 * Config keys whose values are secrets: engine environments, the webhook secret, the store's URL,
 * the credentials, and GitHub's token and App key.
 */
export const isSecretPath = (path: Path): boolean =>
  (path[0] === 'engines' && path[2] === 'env') ||
  (path[0] === 'webhook' && path[1] === 'secret') ||
  (path[0] === 'store' && path[1] === 'url') ||
  path[0] === 'credentials' ||
  (path[0] === 'github' && path[1] === 'token' && path.length === 2) ||
  (path[0] === 'github' && path[1] === 'app' && path[2] === 'privateKey');

/** Key paths of secret values written literally in the file (not `env:NAME`). */
export function literalSecretPaths(value: unknown, path: Path = []): string[] {
  if (typeof value === 'string') {
    const secret =
      isSecretPath(path) &&
      // A credential is a string or { value, kind }: its kind is not a secret.
      (path[0] !== 'credentials' || path.length === 2 || path[2] === 'value') &&
      // An engine's variables hold URLs and switches too: only those named like a credential.
      (path[0] !== 'engines' || /KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL/i.test(String(path[3]))) &&
      // A store URL without a password (peer or trust authentication) holds no secret.
      (path[0] !== 'store' || urlPassword(path, value).length > 0 || /:[^/@]*@/.test(value));
    return secret && value !== '' && !value.startsWith('env:') ? [formatPath(path)] : [];
  }
  if (value && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) =>
      literalSecretPaths(v, [...path, Array.isArray(value) ? Number(k) : k]),
    );
  }
  return [];
}

export function resolveEnvRefs(
  value: unknown,
  env: Readonly<Record<string, string | undefined>>,
  secrets: string[],
  errors: string[],
  path: Path = [],
  refs: EnvRef[] = [],
): unknown {
  if (typeof value === 'string') {
    if (!value.startsWith('env:')) return value;
    const name = value.slice(4);
    if (!ENV_NAME.test(name)) {
      errors.push(`${formatPath(path)}: "${value}" is not a valid env reference (env:NAME)`);
      return value;
    }
    const resolved = env[name];
    refs.push({ name, path, secret: isSecretPath(path) });
    if (resolved === undefined || resolved === '') {
      errors.push(`${formatPath(path)}: environment variable ${name} is not set (referenced as env:${name})`);
      return '';
    }
    // Credentials and the webhook secret are secrets; a path or a model name read from the
    // environment is not (scrubbing it would blank out ordinary output).
    if (isSecretPath(path)) secrets.push(...secretParts(resolved));
    return resolved;
  }
  if (Array.isArray(value))
    return value.map((v, i) => resolveEnvRefs(v, env, secrets, errors, [...path, i], refs));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = resolveEnvRefs(v, env, secrets, errors, [...path, k], refs);
    return out;
  }
  return value;
}

/** A built-in preset with a config override on top: objects merge one level, arrays replace. */
export function mergeEngine(name: string, base: unknown, override: EngineOverride | undefined): EnginePreset {
  const merged: Record<string, unknown> = { ...(base as Record<string, unknown> | undefined) };
  for (const [key, value] of Object.entries(override ?? {})) {
    if (value === undefined) continue;
    const prev = merged[key];
    merged[key] =
      prev &&
      typeof prev === 'object' &&
      !Array.isArray(prev) &&
      value &&
      typeof value === 'object' &&
      !Array.isArray(value)
        ? { ...prev, ...value }
        : value;
  }
  // jitless: a schema parsed once is faster interpreted than compiled (zod's JIT builds a function).
  const result = presetSchema.safeParse(merged, { jitless: true });
  if (!result.success) {
    const lines = formatIssues(result.error.issues, ['engines', name]);
    const hint = base
      ? `Check the override of the built-in "${name}" engine.`
      : `"${name}" is not a built-in engine, so it must declare binary, protocol, headless.args and sessionId.`;
    throw new LoopError('config-invalid', `invalid engine "${name}":\n  ${lines.join('\n  ')}`, { hint });
  }
  return result.data;
}

function parseConfigText(path: string, text: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const lines = doc.errors.map((e) => e.message.split('\n')[0]);
    throw new LoopError('config-invalid', `${path} is not valid YAML:\n  ${lines.join('\n  ')}`, {
      hint: 'Fix the YAML syntax at the line shown.',
    });
  }
  try {
    return (doc.toJS({ maxAliasCount: 100 }) as unknown) ?? {};
  } catch (cause) {
    // e.g. an alias bomb: the parser refuses to expand it.
    throw new LoopError(
      'config-invalid',
      `${path}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}

/** An `env:NAME` reference met in the file: where, and whether its value is a secret. */
export interface EnvRef {
  name: string;
  path: Path;
  secret: boolean;
}

/** What validating a config file gives, before its paths are placed (see place.ts). */
export interface ValidatedConfig {
  path: string | null;
  config: Config;
  engines: Record<string, EnginePreset>;
  literalSecrets: string[];
  secretValues: string[];
  /** Every `env:NAME` resolved, in the file's order (the config cache keys on their values). */
  envRefs: EnvRef[];
}

export function loadConfig(options: LoadOptions): LoadedConfig {
  const { envRefs: _refs, ...validated } = validateConfig(readConfigText(options), options.env);
  return { ...validated, ...placePaths(options, validated.path, validated.config) };
}

/** Read (YAML), resolve `env:` references, validate, merge the engines: a config as it will run. */
export function validateConfig(
  file: ConfigFile,
  env: Readonly<Record<string, string | undefined>>,
): ValidatedConfig {
  const { found } = file;
  const raw = file.text === null ? {} : parseConfigText(file.path, file.text);
  const where = found ?? 'the default configuration';
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new LoopError('config-invalid', `${where}: the top level must be a mapping of keys to values`);
  }
  const secretValues: string[] = [];
  const envErrors: string[] = [];
  const envRefs: EnvRef[] = [];
  const resolved = resolveEnvRefs(raw, env, secretValues, envErrors, [], envRefs) as Record<string, unknown>;
  // An engine key with only comments under it parses as null: treat it as "no override".
  const engineEntries = resolved.engines;
  if (engineEntries && typeof engineEntries === 'object' && !Array.isArray(engineEntries)) {
    for (const [name, value] of Object.entries(engineEntries)) {
      if (value === null) (engineEntries as Record<string, unknown>)[name] = {};
    }
  }
  if (envErrors.length > 0) {
    throw new LoopError('env-missing', `${where}:\n  ${envErrors.join('\n  ')}`, {
      hint: 'Export the variables named, or change the env: references.',
    });
  }
  applyConsoleAlias(resolved, where);
  const parsed = configSchema.safeParse(resolved, { jitless: true });
  if (!parsed.success) {
    throw new LoopError(
      'config-invalid',
      `${where} is invalid:\n  ${formatIssues(parsed.error.issues).join('\n  ')}`,
      {
        hint: 'See `the-loop config schema` for every key and its type.',
      },
    );
  }
  const config = parsed.data;
  // A credential written into the file itself is as secret as one read through env:.
  for (const value of Object.values(config.credentials)) {
    const text = typeof value === 'string' ? value : value?.value;
    if (text && !secretValues.includes(text)) secretValues.push(text);
  }
  for (const text of [config.github.token, config.github.app?.privateKey]) {
    if (text && !secretValues.includes(text)) secretValues.push(text);
  }
  const engines = mergeEngines(config, resolved, where);
  return { path: found, config, literalSecrets: literalSecretPaths(raw), engines, secretValues, envRefs };
}

/**
 * Each engine: the built-in preset with what the file actually says on top (not the parsed
 * override, whose defaults would replace the built-in preset's fields), validated as a whole; and
 * every engine a route names must exist — said now, with the key, not at the first delivery.
 */
function mergeEngines(
  config: Config,
  resolved: Record<string, unknown>,
  where: string,
): Record<string, EnginePreset> {
  const rawEngines = ((resolved as { engines?: Record<string, EngineOverride> }).engines ?? {}) as Record<
    string,
    EngineOverride
  >;
  const engines: Record<string, EnginePreset> = {};
  const names = new Set([...Object.keys(BUILTIN_PRESETS), ...Object.keys(config.engines)]);
  for (const name of names) {
    const base = Object.hasOwn(BUILTIN_PRESETS, name) ? BUILTIN_PRESETS[name] : undefined;
    engines[name] = mergeEngine(name, base, Object.hasOwn(rawEngines, name) ? rawEngines[name] : undefined);
  }
  if (!Object.hasOwn(engines, config.defaults.engine)) {
    throw new LoopError(
      'config-invalid',
      `${where}: defaults.engine "${config.defaults.engine}" is not a known engine`,
      {
        hint: `Known engines: ${[...names].join(', ')}.`,
      },
    );
  }
  checkRepoKeys(config.repos, where);
  const engineRefs: Array<[string, string | undefined]> = [
    ['routing.engine', config.routing.engine],
    ...Object.entries(config.repos).map(([name, repo]): [string, string | undefined] => [
      `repos.${name}.engine`,
      repo.engine,
    ]),
  ];
  for (const [key, engine] of engineRefs) {
    if (engine !== undefined && !Object.hasOwn(engines, engine)) {
      throw new LoopError('config-invalid', `${where}: ${key}: "${engine}" is not a known engine`, {
        hint: `Known engines: ${[...names].join(', ')}.`,
      });
    }
  }
  return engines;
}
