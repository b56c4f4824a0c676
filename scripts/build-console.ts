/**
 * Builds the browser console (issue 14) into dist/console-ui/ (beside, never inside, tsc's dist/console/): each page's entry bundled by esbuild
 * (ESM, Chrome 110+, minified, a linked source map) into assets/<page>.js, the page templates to
 * <page>.html (served as they are: they hold no data), the login page to login.html (the daemon fills
 * in the login's key and public id; login.js keeps them in localStorage), the stylesheet and
 * xterm.js's to assets/.
 * No code splitting: the daemon serves a fixed list of asset names.
 *
 *   node --import tsx scripts/build-console.ts [--outdir <dir>]
 *
 * Prints nothing on success; on failure, what failed, and exits 1.
 */
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

export const PAGES = ['sessions', 'session', 'usage', 'acts'] as const;
/** The pages and the login page: each an entry (console/src/<name>.ts) and a template. */
const ENTRIES = [...PAGES, 'login'] as const;

/** The repository's root (this file is scripts/build-console.ts). */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export interface BuildConsoleOptions {
  /** Where to write (default dist/console-ui). Emptied first: no stale asset outlives a build. */
  outdir?: string;
}

export async function buildConsole(options: BuildConsoleOptions = {}): Promise<string> {
  const outdir = resolve(options.outdir ?? join(ROOT, 'dist', 'console-ui'));
  const assets = join(outdir, 'assets');
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(assets, { recursive: true });
  await build({
    absWorkingDir: ROOT,
    entryPoints: Object.fromEntries(
      ENTRIES.map((page) => [page, join(ROOT, 'console', 'src', `${page}.ts`)]),
    ),
    outdir: assets,
    bundle: true,
    format: 'esm',
    target: 'chrome110',
    platform: 'browser',
    minify: true,
    sourcemap: 'linked',
    // The console/ sources are checked by tsc -p console/tsconfig.json; esbuild only strips types.
    tsconfig: join(ROOT, 'console', 'tsconfig.json'),
    logLevel: 'silent',
    // xterm.js's licence stays in its bundle (no extra file for the daemon's fixed asset list).
    legalComments: 'eof',
  });
  for (const page of ENTRIES) {
    copyFileSync(join(ROOT, 'console', 'static', `${page}.html`), join(outdir, `${page}.html`));
  }
  copyFileSync(join(ROOT, 'console', 'static', 'console.css'), join(assets, 'console.css'));
  copyFileSync(join(ROOT, 'node_modules', '@xterm', 'xterm', 'css', 'xterm.css'), join(assets, 'xterm.css'));
  return outdir;
}

function outdirArg(argv: readonly string[]): string | undefined {
  const at = argv.indexOf('--outdir');
  if (at === -1) return undefined;
  const value = argv[at + 1];
  if (!value) throw new Error('--outdir needs a directory');
  return value;
}

const invoked = process.argv[1] ? pathToFileURL(resolve(process.argv[1])).href === import.meta.url : false;
if (invoked) {
  try {
    await buildConsole({ outdir: outdirArg(process.argv.slice(2)) });
  } catch (error) {
    // esbuild's error names each failure with its file and line; a copy failure names its path.
    process.stderr.write(`build-console: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
