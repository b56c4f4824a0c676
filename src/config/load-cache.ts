import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EnginePreset } from '../engines/preset.js';
import { writePrivateFile } from '../os/private-file.js';
import { sha256Hex } from '../os/sha256.js';
import { decodeEntry, encodeEntry } from './cache-codec.js';
import { type ConfigFile, readConfigText } from './config-file.js';
import { stateHome } from './data-dir.js';
import type { ValidatedConfig } from './load.js';
import type { LoadedConfig, LoadOptions } from './load-types.js';
import { placePaths } from './place.js';
import type { Config } from './schema.js';
import { secretParts } from './secret-parts.js';

/**
 * The validated-config cache: what validating a config file gave, kept so the next command that
 * reads the same file with the same environment skips the YAML parser and the schemas (their code
 * is not even loaded: a third of a short command's time).
 *
 * An entry is used only when everything the validation read is the same: the code that validated
 * (its files' size and mtime: every build changes them), the file's path and bytes, and the value
 * of every `env:NAME` it references (a digest of them). Secrets are never written: a file with a
 * secret written in it is not cached; a secret read through `env:` is blanked in the entry and put
 * back from the environment on use, and the entry's bytes are searched for every secret before
 * they are written (one found: nothing written). Errors are never cached: a config that fails
 * validates again, and says why, each time.
 *
 * Entries live in `$XDG_STATE_HOME/the-loop/config-cache/` (0700; files 0600), one per config path and
 * build, at most MAX_ENTRIES (the least recently written go first: a deleted config leaves no trace).
 * `THE_LOOP_CONFIG_CACHE=0` turns the cache off; `the-loop config check` always validates.
 */
const FORMAT = 'the-loop-config-cache-3';
export const MAX_ENTRIES = 64;

export interface ConfigCache {
  dir: string;
  /** What code validates: an entry made by other code is not used. */
  codeId: string;
}

/** Where a secret goes back on use: in `config` or in `engines`, at a key path. */
interface SecretLeaf {
  root: 'config' | 'engines';
  path: PropertyKey[];
  name: string;
}

interface Entry {
  format: string;
  codeId: string;
  path: string;
  envNames: string[];
  digest: string;
  /** The env names whose values are the config's secret values, in order. */
  secretRefs: string[];
  leaves: SecretLeaf[];
  config: Config;
  engines: Record<string, EnginePreset>;
}

type Env = Readonly<Record<string, string | undefined>>;

const sha256 = sha256Hex;

/**
 * This installation's cache: null when turned off, or when the code runs from its TypeScript
 * sources (tests give theirs).
 */
export function configCacheFor(env: Env): ConfigCache | null {
  if (env.THE_LOOP_CONFIG_CACHE === '0') return null;
  const self = fileURLToPath(import.meta.url);
  if (!self.endsWith('.js')) return null;
  try {
    // tsc rewrites this file at every build; the CLI bundles are rewritten by every build too (the
    // read bundle, a part of the CLI, after the whole one: both share the entries).
    const own = statSync(self);
    const bundle = statSync(new URL('../cli.cjs', import.meta.url), { throwIfNoEntry: false });
    const read = statSync(new URL('../cli-read.cjs', import.meta.url), { throwIfNoEntry: false });
    const codeId = `${buildIdOf(new URL('../cli.cjs', import.meta.url))}:${own.size}:${own.mtimeMs}:${bundle?.size ?? 0}:${bundle?.mtimeMs ?? 0}:${read?.size ?? 0}:${read?.mtimeMs ?? 0}`;
    return { dir: join(stateHome(env), 'the-loop', 'config-cache'), codeId };
  } catch {
    return null;
  }
}

/** The random build id on the CLI bundle's first line ('' without one): new at every build. */
function buildIdOf(bundle: URL): string {
  let fd: number | undefined;
  try {
    fd = openSync(bundle, 'r');
    const head = Buffer.alloc(64);
    const n = readSync(fd, head, 0, head.length, 0);
    return /^\/\*the-loop-build:([0-9a-f]{16,64})\*\//.exec(head.toString('latin1', 0, n))?.[1] ?? '';
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * `loadConfig`, through the cache: on a hit neither the YAML parser nor a schema runs (nor is
 * loaded); on a miss the config is validated as `loadConfig` does, and kept.
 */
export async function loadConfigCached(
  options: LoadOptions,
  cache: ConfigCache | null = configCacheFor(options.env),
): Promise<LoadedConfig> {
  const file = readConfigText(options);
  let validated = cache ? readEntry(cache, file, options.env) : null;
  if (!validated) {
    const { validateConfig } = await import('./load.js');
    validated = validateConfig(file, options.env);
    if (cache) writeEntry(cache, file, options.env, validated);
  }
  const { envRefs: _refs, ...loaded } = validated;
  return { ...loaded, ...placePaths(options, loaded.path, loaded.config) };
}

/**
 * One entry per config path and build: two installations (a global one and a checkout's) reading
 * one config keep an entry each instead of replacing each other's at every command.
 */
const entryFile = (cache: ConfigCache, path: string) =>
  join(cache.dir, `${fnv1a64(JSON.stringify([path, cache.codeId]))}.bin`);

/** FNV-1a, 64 bits, as hex: an entry's file name (not a check: the entry's digest is). */
function fnv1a64(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (let i = 0; i < text.length; i++)
    hash = ((hash ^ BigInt(text.charCodeAt(i))) * 0x100000001b3n) & 0xffffffffffffffffn;
  return hash.toString(16).padStart(16, '0');
}

/** What an entry was made from, in one SHA-256: the code, the file's path and text, the env values. */
function inputsDigest(cache: ConfigCache, file: ConfigFile, names: string[], env: Env): string {
  return sha256(
    JSON.stringify([FORMAT, cache.codeId, file.path, file.text, names.map((n) => [n, env[n] ?? null])]),
  );
}

function isEntry(value: unknown): value is Entry {
  const e = value as Partial<Entry> | null;
  return (
    !!e &&
    typeof e === 'object' &&
    e.format === FORMAT &&
    typeof e.digest === 'string' &&
    Array.isArray(e.envNames) &&
    e.envNames.every((n) => typeof n === 'string') &&
    Array.isArray(e.secretRefs) &&
    Array.isArray(e.leaves) &&
    !!e.config &&
    typeof e.config === 'object' &&
    !!e.engines &&
    typeof e.engines === 'object'
  );
}

/** The cached validation of this file with this environment, env values put back; null: none. */
export function readEntry(cache: ConfigCache, file: ConfigFile, env: Env): ValidatedConfig | null {
  try {
    const bytes = readPrivate(cache.dir, entryFile(cache, file.path));
    return bytes ? entryOf(decodeEntry(bytes), cache, file, env) : null;
  } catch {
    // A damaged entry is no entry: the config is validated again, and the entry replaced.
    return null;
  }
}

const isLeaf = (leaf: unknown): leaf is SecretLeaf => {
  const l = leaf as Partial<SecretLeaf> | null;
  return (
    !!l &&
    (l.root === 'config' || l.root === 'engines') &&
    Array.isArray(l.path) &&
    l.path.every((k) => typeof k === 'string' || typeof k === 'number') &&
    typeof l.name === 'string'
  );
};

function entryOf(entry: unknown, cache: ConfigCache, file: ConfigFile, env: Env): ValidatedConfig | null {
  if (!isEntry(entry) || entry.codeId !== cache.codeId || entry.path !== file.path) return null;
  if (!entry.leaves.every(isLeaf) || !entry.secretRefs.every((n) => typeof n === 'string')) return null;
  if (entry.digest !== inputsDigest(cache, file, entry.envNames, env)) return null;
  const secretValues: string[] = [];
  for (const name of entry.secretRefs) {
    const value = env[name];
    if (!value) return null;
    secretValues.push(...secretParts(value));
  }
  for (const leaf of entry.leaves) {
    const value = env[leaf.name];
    const root = leaf.root === 'config' ? entry.config : entry.engines;
    if (value === undefined || !setAt(root, leaf.path, value)) return null;
  }
  const { config, engines } = entry;
  return { path: file.found, config, engines, literalSecrets: [], secretValues, envRefs: [] };
}

const notOurs = (stat: { uid: number; mode: number }) =>
  (process.getuid !== undefined && stat.uid !== process.getuid()) || (stat.mode & 0o022) !== 0;

/**
 * An entry's bytes, when no one else could have written them: a regular file (not a link) owned by
 * this user and writable by no one else, in a directory likewise. An entry decides which binaries
 * the daemon runs: one planted by another user must not be used.
 */
function readPrivate(dir: string, path: string): Buffer | null {
  const where = statSync(dir, { throwIfNoEntry: false });
  if (!where?.isDirectory() || notOurs(where)) return null;
  // Not a link; a FIFO planted there opens without blocking (and is not a regular file).
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    return stat.isFile() && !notOurs(stat) ? readFileSync(fd) : null;
  } finally {
    closeSync(fd);
  }
}

function parentOf(root: unknown, path: PropertyKey[]): Record<PropertyKey, unknown> | null {
  let node = root;
  for (const key of path.slice(0, -1)) {
    if (!node || typeof node !== 'object' || !Object.hasOwn(node, key)) return null;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node && typeof node === 'object' ? (node as Record<PropertyKey, unknown>) : null;
}

function setAt(root: unknown, path: PropertyKey[], value: string): boolean {
  const parent = parentOf(root, path);
  const key = path.at(-1);
  if (!parent || key === undefined || !Object.hasOwn(parent, key)) return false;
  parent[key] = value;
  return true;
}

function getAt(root: unknown, path: PropertyKey[]): unknown {
  const key = path.at(-1);
  const parent = parentOf(root, path);
  return parent && key !== undefined && Object.hasOwn(parent, key) ? parent[key] : undefined;
}

/**
 * The entry to write for a validation, secrets blanked; null when it must not be cached (a secret
 * in the file itself, or one that would remain in the entry's bytes).
 */
export function entryBytes(
  cache: ConfigCache,
  file: ConfigFile,
  env: Env,
  v: ValidatedConfig,
): Buffer | null {
  if (v.literalSecrets.length > 0) return null;
  const secretRefs = v.envRefs.filter((r) => r.secret).map((r) => r.name);
  const secrets = secretRefs.flatMap((n) => secretParts(env[n] ?? ''));
  // Too short to search the entry for, or a secret not read through env: (none should be).
  if (secrets.some((s) => s.length < 8) || v.secretValues.some((s) => !secrets.includes(s))) return null;
  const config = structuredClone(v.config);
  const engines = structuredClone(v.engines);
  const leaves: SecretLeaf[] = [];
  // Every value read through env: is blanked, not only those the config calls secrets: a header
  // or a URL with a token in it (an engine's otel.env, a bypass env) must not land on disk either.
  for (const ref of v.envRefs) {
    const value = env[ref.name];
    const places: SecretLeaf[] = [{ root: 'config', path: [...ref.path], name: ref.name }];
    if (ref.path[0] === 'engines') places.push({ root: 'engines', path: ref.path.slice(1), name: ref.name });
    for (const place of places) {
      const root = place.root === 'config' ? config : engines;
      if (getAt(root, place.path) === value && setAt(root, place.path, '')) leaves.push(place);
    }
  }
  const envNames = [...new Set(v.envRefs.map((r) => r.name))];
  const entry: Entry = {
    format: FORMAT,
    codeId: cache.codeId,
    path: file.path,
    envNames,
    digest: inputsDigest(cache, file, envNames, env),
    secretRefs,
    leaves,
    config,
    engines,
  };
  const bytes = encodeEntry(entry);
  if (!bytes) return null;
  // No env value long enough to be a credential may remain (one a schema transformed, say): as it
  // is, or as JSON writes it (escaped quotes, backslashes and controls).
  const values = [...new Set(v.envRefs.map((r) => env[r.name] ?? ''))].filter((x) => x.length >= 8);
  for (const value of values) {
    for (const form of [value, JSON.stringify(value).slice(1, -1)]) {
      if (bytes.includes(Buffer.from(form, 'utf8'))) return null;
    }
  }
  return bytes;
}

/** Keep a validation (best effort: a cache that cannot be written only costs the next command time). */
function writeEntry(cache: ConfigCache, file: ConfigFile, env: Env, v: ValidatedConfig): void {
  const bytes = entryBytes(cache, file, env, v);
  if (!bytes) return;
  const target = entryFile(cache, file.path);
  try {
    mkdirSync(cache.dir, { recursive: true, mode: 0o700 });
    // Written (and pruned) only in a directory of ours alone, as entries are read.
    const where = lstatSync(cache.dir);
    if (!where.isDirectory() || notOurs(where)) return;
    writePrivateFile(cache.dir, basename(target), bytes);
    prune(cache.dir, target);
  } catch {
    // Not written: the next command validates again.
  }
}

/**
 * Keep the newest MAX_ENTRIES entries, `written` among them (run after a write, i.e. only when a
 * config was validated).
 */
function prune(dir: string, written: string): void {
  const entries = readdirSync(dir).filter((name) => name.endsWith('.bin') && join(dir, name) !== written);
  if (entries.length < MAX_ENTRIES) return;
  const byAge = entries
    .map((name) => ({ name, mtime: statSync(join(dir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const { name } of byAge.slice(MAX_ENTRIES - 1)) rmSync(join(dir, name), { force: true });
}
