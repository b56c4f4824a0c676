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
const { Script } = require('node:vm');

const DIST = join(__dirname, '..', 'dist');
const BUNDLE = join(DIST, 'cli.cjs');
const CACHE_DIR = join(DIST, 'cli-cache');
const MAGIC = 'the-loop-code-cache-1';

/**
 * One cache per command group (`usage`, `sessions` …, `other` for the rest): each holds what its
 * commands compiled, so a command deserializes only its own code.
 */
const GROUPS = ['usage', 'acts', 'sessions', 'events', 'config', 'serve', 'mcp', 'other'];

/**
 * The daemon and the connector's server run tsc's dist/, not the bundle: their start is paid once,
 * and the stack traces in their logs keep their names and files.
 */
const UNBUNDLED = ['serve', 'mcp'];

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

/**
 * `<magic> <build id> <size> <mtimeMs>\n`: what the cache was made from. The build id is on the
 * bundle's first line (a random id, new at each build): a bundle rebuilt with the same size and
 * mtime still has another.
 */
function header(stat, buildId) {
  return `${MAGIC} ${buildId} ${stat.size} ${stat.mtimeMs}\n`;
}

/** The build id on the bundle's first line ('' when there is none). */
function buildIdOf(source) {
  const match = /^\/\*the-loop-build:([0-9a-f]{16,64})\*\//.exec(source);
  return match ? match[1] : '';
}

/** V8's data in a cache file's bytes, if the file was made from this bundle (build id, size, mtime). */
function cachedDataOf(stat, buildId, bytes) {
  if (!buildId) return undefined;
  const expected = Buffer.from(header(stat, buildId));
  if (bytes.length <= expected.length || !bytes.subarray(0, expected.length).equals(expected))
    return undefined;
  return bytes.subarray(expected.length);
}

function readCache(stat, buildId, group) {
  if (!group) return undefined;
  try {
    return cachedDataOf(stat, buildId, readFileSync(join(CACHE_DIR, `${group}.bin`)));
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
    cachedData: readCache(stat, buildIdOf(source), group),
  });
  const bundle = { exports: {} };
  script
    .runInThisContext()
    .call(bundle.exports, bundle.exports, Module.createRequire(BUNDLE), bundle, BUNDLE, DIST);
  return { exports: bundle.exports, script, stat, buildId: buildIdOf(source) };
}

/**
 * Build time only: load the bundle without a cache, run each argv in this process, then write the
 * group's cache of what they compiled.
 */
async function trainCodeCache(group, commands) {
  const { exports, script, stat, buildId } = loadCli(undefined);
  for (const args of commands) await exports.main(['node', 'the-loop', ...args]);
  mkdirSync(CACHE_DIR, { recursive: true });
  if (!buildId) throw new Error(`${BUNDLE} has no build id on its first line`);
  const data = Buffer.concat([Buffer.from(header(stat, buildId)), script.createCachedData()]);
  writeFileSync(join(CACHE_DIR, `${group}.bin`), data);
}

module.exports = {
  UNBUNDLED,
  commandGroup,
  header,
  buildIdOf,
  cachedDataOf,
  loadCli,
  trainCodeCache,
  BUNDLE,
  GROUPS,
};
