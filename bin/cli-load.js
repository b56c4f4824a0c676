// Loads the CLI bundle (dist/cli.cjs, built by scripts/build-cli.ts) with V8's code cache.
//
// The bundle is a CommonJS script compiled through vm.Script: given the cached data made at build
// time, V8 neither parses nor compiles what the cache holds. The cache starts with a header naming
// the bundle's size and mtime; one that does not match (the bundle rebuilt, copied or edited) is not
// used, and V8 rejects data made by another Node or other V8 flags. Either way the bundle runs,
// compiled as any script would be.
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { constants, Script } from 'node:vm';

const DIST = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
export const BUNDLE = join(DIST, 'cli.cjs');
const CACHE_DIR = join(DIST, 'cli-cache');
const MAGIC = 'the-loop-code-cache-1';

/**
 * One cache per command group (`usage`, `sessions` …, `other` for the rest): each holds what its
 * commands compiled, so a command deserializes only its own code.
 */
export const GROUPS = ['usage', 'acts', 'sessions', 'events', 'config', 'other'];

/** The group of an argv (`node the-loop [globals] <command> …`): the first word not an option's. */
export function commandGroup(argv) {
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-c' || arg === '--config' || arg === '--data-dir') {
      i++;
      continue;
    }
    if (arg.startsWith('-')) continue;
    return GROUPS.includes(arg) ? arg : 'other';
  }
  return 'other';
}

/** `<magic> <size> <mtimeMs>\n`: what the cache was made from. */
export function header(stat) {
  return `${MAGIC} ${stat.size} ${stat.mtimeMs}\n`;
}

/** V8's data in a cache file's bytes, if the file was made from this bundle (its size and mtime). */
export function cachedDataOf(stat, bytes) {
  const expected = Buffer.from(header(stat));
  if (bytes.length <= expected.length || !bytes.subarray(0, expected.length).equals(expected)) return undefined;
  return bytes.subarray(expected.length);
}

function readCache(stat, group) {
  if (!group) return undefined;
  try {
    return cachedDataOf(stat, readFileSync(join(CACHE_DIR, `${group}.bin`)));
  } catch {
    return undefined;
  }
}

/** The bundle's exports ({ main }), and the script (whose cached data training writes). */
export function loadCli(group) {
  const stat = statSync(BUNDLE);
  // esbuild writes ASCII only (non-ASCII characters as \u escapes): latin1 reads it without UTF-8
  // decoding.
  const source = readFileSync(BUNDLE, 'latin1');
  const script = new Script(Module.wrap(source), {
    filename: BUNDLE,
    cachedData: readCache(stat, group),
    // node-pty and other packages the bundle leaves out are loaded by import().
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, createRequire(BUNDLE), module, BUNDLE, DIST);
  return { exports: module.exports, script, stat };
}

/**
 * Build time only: load the bundle without a cache, run each argv in this process, then write the
 * group's cache of what they compiled.
 */
export async function trainCodeCache(group, commands) {
  const { exports, script, stat } = loadCli(undefined);
  for (const args of commands) await exports.main(['node', 'the-loop', ...args]);
  mkdirSync(CACHE_DIR, { recursive: true });
  const data = Buffer.concat([Buffer.from(header(stat)), script.createCachedData()]);
  writeFileSync(join(CACHE_DIR, `${group}.bin`), data);
}
