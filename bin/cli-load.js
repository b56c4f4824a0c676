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
/** The CLI without what only other commands load (scripts/build-cli.ts READ_LEAVES_OUT). */
const READ_BUNDLE = join(DIST, 'cli-read.cjs');
const CACHE_DIR = join(DIST, 'cli-cache');
const MAGIC = 'the-loop-code-cache-1';

/**
 * One cache per command group (`usage`, `sessions` …, `other` for the rest): each holds what its
 * commands compiled, so a command deserializes only its own code.
 */
const GROUPS = ['usage', 'acts', 'sessions', 'events', 'config', 'run', 'serve', 'mcp', 'other'];

/**
 * The daemon and the connector's server run tsc's dist/, not the bundle: their start is paid once,
 * and the stack traces in their logs keep their names and files.
 */
const UNBUNDLED = ['serve', 'mcp'];

/** Where the command's name is in an argv (`node the-loop [globals] <command> …`), or -1. */
function commandIndex(argv) {
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-c' || arg === '--config' || arg === '--data-dir') {
      i++;
      continue;
    }
    if (!arg.startsWith('-')) return i;
  }
  return -1;
}

/** The group of an argv: its first word not an option's. */
function commandGroup(argv) {
  const at = commandIndex(argv);
  return at >= 0 && GROUPS.includes(argv[at]) ? argv[at] : 'other';
}

/**
 * Whether the argv is a command the read bundle serves: `sessions list`, `events list|show`,
 * `usage` (not `usage scan`) and `acts`, named exactly (`sessions --json list` goes to the whole
 * CLI). They read the registry through the base, never the app.
 */
function readsOnly(argv) {
  const at = commandIndex(argv);
  if (at < 0) return false;
  const next = argv[at + 1];
  switch (argv[at]) {
    case 'sessions':
      return next === 'list';
    case 'events':
      return next === 'list' || next === 'show';
    case 'usage':
      return !argv.slice(at + 1).includes('scan');
    case 'acts':
      return true;
    default:
      return false;
  }
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

function readCache(stat, buildId, name) {
  if (!name) return undefined;
  try {
    return cachedDataOf(stat, buildId, readFileSync(join(CACHE_DIR, `${name}.bin`)));
  } catch {
    return undefined;
  }
}

/**
 * Packages bundled apart (scripts/build-cli.ts), each in dist/<file> with its own code cache: the
 * commands that never validate with a schema or parse YAML (a cached config: see
 * src/config/load-cache.ts) neither read nor deserialize them. A `require("zod")` in the CLI bundle
 * loads dist/cli-zod.cjs, once.
 */
const VENDOR = { zod: 'cli-zod.cjs', yaml: 'cli-yaml.cjs' };
const vendors = new Map();

/**
 * A wrapped script of dist/ compiled through vm.Script, with the cache `<name>.bin` when it was
 * made from this very file (build id, size, mtime); run with `require`.
 */
function runScript(file, cacheName, scriptRequire) {
  const stat = statSync(file);
  // esbuild writes ASCII only (non-ASCII characters as \u escapes): latin1 reads it without UTF-8
  // decoding.
  const source = readFileSync(file, 'latin1');
  const buildId = buildIdOf(source);
  // The file is written wrapped (scripts/build-cli.ts): its text is the function to call.
  const script = new Script(source, { filename: file, cachedData: readCache(stat, buildId, cacheName) });
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, scriptRequire, module, file, DIST);
  return { exports: module.exports, script, stat, buildId, file };
}

function vendor(id, nodeRequire, useCache) {
  let loaded = vendors.get(id);
  if (!loaded) {
    loaded = runScript(join(DIST, VENDOR[id]), useCache ? id : undefined, nodeRequire);
    vendors.set(id, loaded);
  }
  return loaded.exports;
}

/**
 * The bundle's exports ({ main }), and the script (whose cached data training writes): the read
 * bundle's with `read`, its caches named `read-<group>`.
 */
function loadCli(group, options = {}) {
  const nodeRequire = Module.createRequire(BUNDLE);
  const useCache = group !== undefined;
  const bundleRequire = Object.assign(
    (id) => (Object.hasOwn(VENDOR, id) ? vendor(id, nodeRequire, useCache) : nodeRequire(id)),
    nodeRequire,
  );
  if (options.read) return runScript(READ_BUNDLE, useCache ? `read-${group}` : undefined, bundleRequire);
  return runScript(BUNDLE, group, bundleRequire);
}

function writeCache(name, { script, stat, buildId, file }) {
  if (!buildId) throw new Error(`${file} has no build id on its first line`);
  mkdirSync(CACHE_DIR, { recursive: true });
  const data = Buffer.concat([Buffer.from(header(stat, buildId)), script.createCachedData()]);
  writeFileSync(join(CACHE_DIR, `${name}.bin`), data);
}

/**
 * Build time only: load the bundle without a cache, run each argv in this process, then write the
 * group's cache of what they compiled — and, with `vendors`, the caches of the packages bundled
 * apart that the commands loaded.
 */
async function trainCodeCache(group, commands, options = {}) {
  const loaded = loadCli(undefined, { read: options.read });
  for (const args of commands) await loaded.exports.main(['node', 'the-loop', ...args]);
  writeCache(options.read ? `read-${group}` : group, loaded);
  if (options.vendors) for (const [id, script] of vendors) writeCache(id, script);
}

module.exports = {
  UNBUNDLED,
  commandGroup,
  readsOnly,
  header,
  buildIdOf,
  cachedDataOf,
  loadCli,
  trainCodeCache,
  BUNDLE,
  READ_BUNDLE,
  DIST,
  GROUPS,
  VENDOR,
};
