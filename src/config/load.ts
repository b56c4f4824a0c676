import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { LoopError } from '../core/errors.js';
import { ENV_NAME, type EnginePreset, presetSchema } from '../engines/preset.js';
import { BUILTIN_PRESETS } from '../engines/presets.js';
import { applyConsoleAlias } from './console-schema.js';
import { resolveDataDir } from './data-dir.js';
import { checkRepoKeys } from './repos.js';
import { type Config, configSchema, type EngineOverride } from './schema.js';

export const DEFAULT_CONFIG_PATH = '.the-loop/config.yaml';
/** A config file is a few KB; anything this large is a mistake (or an attack on the parser). */
const MAX_CONFIG_BYTES = 1024 * 1024;

export interface LoadedConfig {
  /** The file read, or null when none exists and defaults are used. */
  path: string | null;
  config: Config;
  /** Absolute data directory. */
  dataDir: string;
  /** The git work tree the data dir is in (null: none, as it should be). */
  dataDirWorkTree: string | null;
  /** In the state home: the config directory the data dir belongs to (see `prepareDataDir`). */
  dataDirOrigin: string | null;
  /** Said on stderr by the commands that open the data dir (e.g. it is inside a work tree). */
  warnings: string[];
  /** Key paths of secrets written into the config file itself rather than as env:NAME. */
  literalSecrets: string[];
  logFile: string;
  /** Every engine, built-in presets merged with config, validated. */
  engines: Record<string, EnginePreset>;
  /** Values read through `env:NAME`: treated as secrets everywhere. */
  secretValues: string[];
}

export interface LoadOptions {
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /** `--config`; else THE_LOOP_CONFIG; else `.the-loop/config.yaml` under cwd. */
  configPath?: string | undefined;
  /**
   * `--data-dir`; else THE_LOOP_DATA_DIR; else config `dataDir`; else a registry already beside the
   * config file; else the config file's directory — or, when that is inside a git work tree,
   * `$XDG_STATE_HOME/the-loop/<name>-<digest>` (see data-dir.ts).
   */
  dataDir?: string | undefined;
}

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

/** Replace every `env:NAME` string by the variable's value; report unset ones by key path. */
/** Config keys whose values are secrets: engine environments and the webhook secret. */
export const isSecretPath = (path: Path): boolean =>
  (path[0] === 'engines' && path[2] === 'env') ||
  (path[0] === 'webhook' && path[1] === 'secret') ||
  path[0] === 'credentials';

/** Key paths of secret values written literally in the file (not `env:NAME`). */
export function literalSecretPaths(value: unknown, path: Path = []): string[] {
  if (typeof value === 'string') {
    const secret =
      isSecretPath(path) &&
      // A credential is a string or { value, kind }: its kind is not a secret.
      (path[0] !== 'credentials' || path.length === 2 || path[2] === 'value') &&
      // An engine's variables hold URLs and switches too: only those named like a credential.
      (path[0] !== 'engines' || /KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL/i.test(String(path[3])));
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
): unknown {
  if (typeof value === 'string') {
    if (!value.startsWith('env:')) return value;
    const name = value.slice(4);
    if (!ENV_NAME.test(name)) {
      errors.push(`${formatPath(path)}: "${value}" is not a valid env reference (env:NAME)`);
      return value;
    }
    const resolved = env[name];
    if (resolved === undefined || resolved === '') {
      errors.push(`${formatPath(path)}: environment variable ${name} is not set (referenced as env:${name})`);
      return '';
    }
    // Credentials and the webhook secret are secrets; a path or a model name read from the
    // environment is not (scrubbing it would blank out ordinary output).
    if (isSecretPath(path)) secrets.push(resolved);
    return resolved;
  }
  if (Array.isArray(value)) return value.map((v, i) => resolveEnvRefs(v, env, secrets, errors, [...path, i]));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = resolveEnvRefs(v, env, secrets, errors, [...path, k]);
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

function readConfigFile(path: string): unknown {
  const size = statSync(path).size;
  if (size > MAX_CONFIG_BYTES) {
    throw new LoopError(
      'config-invalid',
      `${path}: ${size} bytes is too large for a config file (max ${MAX_CONFIG_BYTES})`,
    );
  }
  const doc = parseDocument(readFileSync(path, 'utf8'), { prettyErrors: true, uniqueKeys: true });
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

export function loadConfig(options: LoadOptions): LoadedConfig {
  const explicit = options.configPath ?? options.env.THE_LOOP_CONFIG;
  const path = resolve(options.cwd, explicit ?? DEFAULT_CONFIG_PATH);
  let raw: unknown = {};
  let found: string | null = null;
  if (existsSync(path)) {
    raw = readConfigFile(path);
    found = path;
  } else if (explicit) {
    throw new LoopError('config-missing', `config file not found: ${path}`, {
      hint: 'Create one with `the-loop config init`, or fix --config / THE_LOOP_CONFIG.',
    });
  }
  const where = found ?? 'the default configuration';
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new LoopError('config-invalid', `${where}: the top level must be a mapping of keys to values`);
  }
  const secretValues: string[] = [];
  const envErrors: string[] = [];
  const resolved = resolveEnvRefs(raw, options.env, secretValues, envErrors) as Record<string, unknown>;
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
  // Merge what the file actually says (not the parsed override, whose defaults would replace the
  // built-in preset's fields), then validate the merged preset as a whole.
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
  // Every engine a route may pick must exist: say so now, with the key, not at the first delivery.
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
  return {
    path: found,
    config,
    ...placePaths(options, found, config),
    literalSecrets: literalSecretPaths(raw),
    engines,
    secretValues,
  };
}

/** The data dir and the log file; the config's relative paths made absolute (relative to the file). */
function placePaths(
  options: LoadOptions,
  found: string | null,
  config: Config,
): Pick<LoadedConfig, 'dataDir' | 'dataDirWorkTree' | 'dataDirOrigin' | 'warnings' | 'logFile'> {
  const baseDir = found ? dirname(found) : resolve(options.cwd, '.the-loop');
  const dataDirOpt = options.dataDir ?? options.env.THE_LOOP_DATA_DIR;
  const place = resolveDataDir({
    explicit: dataDirOpt
      ? resolve(options.cwd, dataDirOpt)
      : config.dataDir
        ? resolve(baseDir, config.dataDir)
        : undefined,
    configDir: baseDir,
    env: options.env,
  });
  const logFile = config.log.file
    ? isAbsolute(config.log.file)
      ? config.log.file
      : resolve(baseDir, config.log.file)
    : resolve(place.dataDir, 'the-loop.log');
  if (config.defaults.cwd) config.defaults.cwd = resolve(baseDir, config.defaults.cwd);
  for (const repo of Object.values(config.repos)) repo.path = resolve(baseDir, repo.path);
  return {
    dataDir: place.dataDir,
    dataDirWorkTree: place.workTree,
    dataDirOrigin: place.origin,
    warnings: place.warnings,
    logFile,
  };
}
