/**
 * Builds the CLI into one file, dist/cli.cjs, and V8 code caches, dist/cli-cache/<group>.bin (issue 16:
 * "a CLI that answers at once"). bin/the-loop.js loads the bundle through bin/cli-load.js. Also
 * writes the price dataset as JSON, dist/genai-prices.json (scripts/build-prices.ts).
 *
 * Why one CommonJS file with a code cache: on Node 20 a command spent most of its start resolving
 * and compiling ~350 ES modules (compiling zod alone is ~65 ms), and Node 20 has no compile cache for
 * ES modules (module.enableCompileCache is Node 22). A CommonJS script compiled through vm.Script
 * can be given V8's cached data, so a command's modules are neither resolved nor compiled again.
 *
 * - Every `import.meta.url` of src/<dir>/<file>.ts becomes the URL the file has in tsc's dist/
 *   (dist/<dir>/<file>.js), so the paths they build (the scan worker, bin/ scripts, package.json, the
 *   console's assets) are those of the tsc build, which stays beside the bundle.
 * - Native addons and data packages stay outside (required from node_modules at run time).
 * - The caches are trained here, one per command group: a child process loads the bundle, runs the
 *   group's commands on a throwaway project (so the functions they compile are in the cache), and
 *   writes V8's data with a header naming the bundle's size and mtime; the loader ignores a cache
 *   whose header does not match the bundle (rebuilt, copied, edited), and V8 itself rejects one made
 *   by another Node or other flags.
 *
 *   node --import tsx scripts/build-cli.ts
 *
 * Prints nothing on success; on failure, what failed, and exits 1.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { writePriceData } from './build-prices.js';
import { turnProject } from './build-train-run.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');
export const BUNDLE = join(ROOT, 'dist', 'cli.cjs');
/** The same CLI without what only other commands load (READ_LEAVES_OUT), for the reading commands. */
export const READ_BUNDLE = join(ROOT, 'dist', 'cli-read.cjs');

/**
 * Loaded from node_modules when used: node-pty (native, loaded by import() when a pty is opened),
 * the price library (when dist/genai-prices.json, read in its place, is missing), and the daemon's large
 * dependencies no other command loads (graphql for the gateway, ws for the console, pg for a
 * PostgreSQL store): left in, they
 * would make every command read and deserialize them. better-sqlite3's JavaScript is bundled; its
 * addon is named by src/store/db.ts.
 */
const EXTERNAL = ['node-pty', '@pydantic/genai-prices', 'graphql', 'ws', '@modelcontextprotocol/sdk', 'pg'];

/**
 * Bundled apart, each into dist/<file> with its own code cache (bin/cli-load.js VENDOR): zod and the
 * YAML parser are 45% of the CLI's code, and a command on a cached config (src/config/load-cache.ts)
 * uses neither — left in, every command would read and deserialize them. The CLI bundle's
 * `require("zod")` is answered by the loader.
 */
export const VENDOR: Record<string, string> = { zod: 'cli-zod.cjs', yaml: 'cli-yaml.cjs' };

/**
 * Node built-ins that cost milliseconds to load (child_process ~9 ms, crypto ~6, worker_threads
 * ~6 …) and that most commands never call: `require("node:x")` in the bundle becomes a proxy that
 * loads the module on its first use. A module read whole (its keys listed, `in`) is loaded then.
 */
const LAZY_BUILTINS = [
  'child_process',
  'crypto',
  'worker_threads',
  'net',
  'tls',
  'http',
  'https',
  'http2',
  'zlib',
  'dgram',
  'dns',
  'readline',
];

export const LAZY_HELPER = `const __theLoopLazy = (id) => {
  let m;
  const load = () => (m ??= require(id));
  return new Proxy({}, {
    get: (_, k) => load()[k],
    defineProperty: (_, k, d) => Reflect.defineProperty(load(), k, d),
    set: (_, k, v) => ((load()[k] = v), true),
    has: (_, k) => k in load(),
    ownKeys: () => Reflect.ownKeys(load()),
    getOwnPropertyDescriptor: (_, k) => {
      const d = Reflect.getOwnPropertyDescriptor(load(), k);
      return d && { ...d, configurable: true };
    },
  });
};`;

/**
 * The bundle's text with each `require("node:x")` of LAZY_BUILTINS made lazy, and each `import()` of
 * an external package a `require()` in a promise (all are CommonJS): an import() in a vm.Script
 * needs Node's experimental loader hook, which warns on stderr.
 */
export function lazyBuiltins(code: string): string {
  const lazy = new RegExp(`\\brequire\\("(node:)?(${LAZY_BUILTINS.join('|')})"\\)`, 'g');
  const imports = new RegExp(`\\bimport\\("((?:${EXTERNAL.join('|')})(?:/[^"]*)?)"\\)`, 'g');
  return code
    .replace(lazy, (_, _prefix, name: string) => `__theLoopLazy("node:${name}")`)
    .replace(imports, (_, name: string) => `Promise.resolve().then(() => require("${name}"))`);
}

/** `import.meta.url` of src/a/b.ts → the URL of dist/a/b.js, computed from the bundle's place. */
const distImportMeta: Plugin = {
  name: 'dist-import-meta',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      if (!source.includes('import.meta')) return undefined;
      const rel = relative(SRC, args.path).replace(/\.ts$/, '.js').split('\\').join('/');
      if (rel.startsWith('..')) throw new Error(`${args.path}: import.meta outside src/`);
      const replaced = source.replaceAll('import.meta.url', `__theLoopDistUrl(${JSON.stringify(rel)})`);
      if (replaced.includes('import.meta'))
        throw new Error(`${args.path}: only import.meta.url is supported in the CLI bundle`);
      return { contents: replaced, loader: 'ts' };
    });
  },
};

/**
 * What the read bundle (dist/cli-read.cjs) leaves out: the modules a command of src/cli/ imports
 * when it runs that `sessions list`, `events list|show`, `usage` and `acts` never import (only
 * those run from it: bin/cli-load.js readsOnly). The app, the daemon, the console, the connector,
 * the scan and the terminal commands are two thirds of the CLI's code, which every reading command
 * read and deserialized. Each is replaced by a module that throws as it loads, so a path of a
 * reading command that reaches one fails loudly (test/cli/read-bundle.test.ts runs each reading command
 * on both bundles); a static import of one fails the build (esbuild warns, warnings fail it).
 */
const READ_LEAVES_OUT = [
  '../main.js',
  '../main-mcp.js',
  '../main-mcp-http.js',
  '../ledger/scan.js',
  './config.js',
  './console.js',
  './doctor.js',
  './mcp-reports.js',
  './run.js',
  './serve.js',
  './sessions-takeover.js',
  './sessions-terminal.js',
];

const readStubs: Plugin = {
  name: 'read-bundle-stubs',
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, (args) =>
      dirname(args.importer) === join(SRC, 'cli') && READ_LEAVES_OUT.includes(args.path)
        ? { path: args.path, namespace: 'read-stub' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'read-stub' }, (args) => ({
      contents: `throw new Error(${JSON.stringify(`internal error: src/cli/${args.path} is not in the read bundle (dist/cli-read.cjs)`)});`,
      loader: 'js',
    }));
  },
};

/**
 * The bundle is written already wrapped as Node wraps a CommonJS module: the loader compiles the
 * file's text as it is read (no 1.3 MB concatenation copied again before compiling). Required as a
 * module, it only defines a function.
 */
const WRAP_OPEN = '(function (exports, require, module, __filename, __dirname) {';
const WRAP_CLOSE = '\n})';

/** The CLI bundle (`read`: the read bundle, READ_LEAVES_OUT left out). */
export async function bundleCli(read = false): Promise<void> {
  const outfile = read ? READ_BUNDLE : BUNDLE;
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [join(SRC, 'cli', 'main.ts')],
    outfile,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    external: [...EXTERNAL, ...Object.keys(VENDOR)],
    plugins: read ? [distImportMeta, readStubs] : [distImportMeta],
    // The bundle sits in dist/, so __dirname is tsc's outDir.
    banner: {
      js: `/*the-loop-build:${randomBytes(16).toString('hex')}*/${WRAP_OPEN}\n'use strict';\nconst __theLoopDistUrl = (p) => require('node:url').pathToFileURL(require('node:path').join(__dirname, p)).href;\n${LAZY_HELPER}`,
    },
    // ASCII only (the loader reads it as latin1); minified: every byte is read and every name
    // deserialized at each start (a third less time than names kept). Readable stack traces:
    // THE_LOOP_UNBUNDLED=1 runs tsc's dist/ instead.
    charset: 'ascii',
    minifyWhitespace: true,
    minifySyntax: true,
    minifyIdentifiers: true,
    legalComments: 'none',
    logLevel: 'silent',
    write: false,
  });
  // A warning (an import.meta of a bundled package left empty, …) is a bundle that may misbehave.
  if (result.warnings.length > 0)
    throw new Error(`esbuild warned:\n${result.warnings.map((w) => `  ${w.text}`).join('\n')}`);
  const [output] = result.outputFiles;
  if (!output || result.outputFiles.length !== 1) throw new Error('esbuild wrote no single bundle');
  const code = lazyBuiltins(output.text);
  // The loader gives vm.Script no import() support (Node's is experimental): none may remain.
  if (/\bimport\(/.test(code))
    throw new Error('the bundle still has an import() (an external package loaded by import()?)');
  writeFileSync(outfile, `${code}${WRAP_CLOSE}`);
}

/** A package bundled apart, wrapped as the CLI bundle is, its build id on its first line. */
export async function bundleVendor(id: string): Promise<void> {
  const result = await build({
    absWorkingDir: ROOT,
    stdin: { contents: `export * from ${JSON.stringify(id)};`, resolveDir: ROOT, loader: 'js' },
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    banner: { js: `/*the-loop-build:${randomBytes(16).toString('hex')}*/${WRAP_OPEN}\n'use strict';` },
    charset: 'ascii',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
    write: false,
  });
  if (result.warnings.length > 0)
    throw new Error(`esbuild warned on ${id}:\n${result.warnings.map((w) => `  ${w.text}`).join('\n')}`);
  const [output] = result.outputFiles;
  if (!output) throw new Error(`esbuild wrote no bundle of ${id}`);
  writeFileSync(join(ROOT, 'dist', VENDOR[id] as string), `${output.text}${WRAP_CLOSE}`);
}

/**
 * What trains each group's cache (bin/cli-load.js GROUPS): the commands a person runs most, on a
 * throwaway project made by `config init`. A group's cache holds what its commands compiled.
 */
const TRAINING: Record<string, string[][]> = {
  config: [
    ['config', 'init'],
    ['config', 'check'],
  ],
  usage: [['usage'], ['usage', '--json', '--by', 'model']],
  acts: [['acts'], ['acts', '--json']],
  sessions: [
    ['sessions', 'list'],
    ['sessions', 'list', '--json'],
  ],
  events: [
    ['events', 'list'],
    ['events', 'list', '--json'],
  ],
  // One whole turn of a stand-in engine (scripts/build-train-run.ts): the cache holds what a turn
  // compiles before its engine starts and after it ends.
  run: [['run', 'github:o/r#1', 'Say hello in one word.']],
  other: [['--help'], ['--version']],
};

function warmConfigCache(cwd: string, env: Record<string, string | undefined>): void {
  const result = spawnSync(process.execPath, [join(ROOT, 'bin', 'the-loop.js'), 'acts', '--json'], {
    cwd,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (result.status !== 0)
    throw new Error(`warming the config cache failed (${result.status}): ${result.stderr}`);
}

/** The groups whose commands the read bundle serves (bin/cli-load.js readsOnly). */
const READ_GROUPS = ['usage', 'acts', 'sessions', 'events'];

/** Trains one group's cache in a child of its own, on the project in `dir`. */
function trainGroup(
  dir: string,
  env: Record<string, string | undefined>,
  group: string,
  commands: string[][],
  options: { vendors?: boolean; read?: boolean },
): void {
  const loader = pathToFileURL(join(ROOT, 'bin', 'cli-load.js')).href;
  const code = `import { trainCodeCache } from ${JSON.stringify(loader)};
await trainCodeCache(${JSON.stringify(group)}, ${JSON.stringify(commands)}, ${JSON.stringify(options)});`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    cwd: dir,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
    timeout: 120_000,
  });
  const name = options.read ? `read-${group}` : group;
  if (result.status !== 0)
    throw new Error(`training the "${name}" code cache failed (${result.status}): ${result.stderr}`);
  statSync(join(ROOT, 'dist', 'cli-cache', `${name}.bin`));
  if (options.vendors)
    for (const id of Object.keys(VENDOR)) statSync(join(ROOT, 'dist', 'cli-cache', `${id}.bin`));
}

/** Trains each group in a child of its own (as a user would run the commands); writes the caches. */
export function trainCaches(): void {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-build-cli-'));
  rmSync(join(ROOT, 'dist', 'cli-cache'), { recursive: true, force: true });
  try {
    const env = { PATH: process.env.PATH, HOME: dir, XDG_STATE_HOME: join(dir, 'state'), LANG: 'C.UTF-8' };
    // `config init` first: the other groups' commands read the project it makes.
    for (const [group, commands] of Object.entries(TRAINING).sort(([a], [b]) =>
      a === 'config' ? -1 : b === 'config' ? 1 : 0,
    )) {
      // `run` runs a turn of its own project (THE_LOOP_CONFIG).
      const groupEnv = group === 'run' ? turnProject(dir, env) : env;
      // Once the project exists, one command validates its config and keeps it in the config cache:
      // the groups then train on what a person's commands run — a cached config, no schema.
      if (group !== 'config') warmConfigCache(dir, groupEnv);
      // The config group validates a config (zod) and parses YAML: it trains their caches too.
      trainGroup(dir, groupEnv, group, commands, { vendors: group === 'config' });
      // The reading commands run from the read bundle: its caches are `read-<group>`.
      if (READ_GROUPS.includes(group)) trainGroup(dir, env, group, commands, { read: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  bundleCli()
    .then(() => bundleCli(true))
    .then(() => Promise.all(Object.keys(VENDOR).map(bundleVendor)))
    .then(writePriceData)
    .then(trainCaches)
    .catch((error: unknown) => {
      process.stderr.write(`build-cli: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    });
}
