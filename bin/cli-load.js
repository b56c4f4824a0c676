// Loads the CLI bundle (dist/cli.cjs, built by scripts/build-cli.ts) with V8's code cache.
//
// The bundle is a CommonJS script compiled through vm.Script: given the cached data made at build
// time, V8 neither parses nor compiles what the cache holds. The cache starts with a header naming
// the bundle's size and mtime; one that does not match (the bundle rebuilt, copied or edited) is not
// used, and V8 rejects data made by another Node or other V8 flags. Either way the bundle runs,
// compiled as any script would be.
const { mkdirSync, readFileSync, statSync, writeFileSync } = require('node:fs');
const Module = require('node:module');
const { join } = require('node:path');
const { constants, Script } = require('node:vm');

const DIST = join(__dirname, '..', 'dist');
const BUNDLE = join(DIST, 'cli.cjs');
const CACHE_DIR = join(DIST, 'cli-cache');
const MAGIC = 'the-loop-code-cache-1';

/**
 * One cache per command group (`usage`, `sessions` …, `other` for the rest): each holds what its
 * commands compiled, so a command deserializes only its own code.
 */
const GROUPS = ['usage', 'acts', 'sessions', 'events', 'config', 'serve', 'other'];

/**
 * The daemon runs tsc's dist/, not the bundle: its start is paid once, and the stack traces in its
 * log keep their names and files.
 */
const UNBUNDLED = ['serve'];

/** The group of an argv (`node the-loop [globals] <command> …`): the first word not an option's. */
function commandGroup(argv) {
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
function header(stat) {
  return `${MAGIC} ${stat.size} ${stat.mtimeMs}\n`;
}

/** V8's data in a cache file's bytes, if the file was made from this bundle (its size and mtime). */
function cachedDataOf(stat, bytes) {
  const expected = Buffer.from(header(stat));
  if (bytes.length <= expected.length || !bytes.subarray(0, expected.length).equals(expected))
    return undefined;
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
function loadCli(group) {
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
  const bundle = { exports: {} };
  script
    .runInThisContext()
    .call(bundle.exports, bundle.exports, Module.createRequire(BUNDLE), bundle, BUNDLE, DIST);
  return { exports: bundle.exports, script, stat };
}

/**
 * Build time only: load the bundle without a cache, run each argv in this process, then write the
 * group's cache of what they compiled.
 */
async function trainCodeCache(group, commands) {
  const { exports, script, stat } = loadCli(undefined);
  for (const args of commands) await exports.main(['node', 'the-loop', ...args]);
  mkdirSync(CACHE_DIR, { recursive: true });
  const data = Buffer.concat([Buffer.from(header(stat)), script.createCachedData()]);
  writeFileSync(join(CACHE_DIR, `${group}.bin`), data);
}

module.exports = { UNBUNDLED, commandGroup, header, cachedDataOf, loadCli, trainCodeCache, BUNDLE, GROUPS };
