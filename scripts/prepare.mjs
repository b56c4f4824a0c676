// `npm ci` / `npm install` run this (the `prepare` script): build, unless the build is current.
//
// npx runs `prepare` again when it links this package for `npx the-loop …` (first use in a
// checkout): without this check a newcomer's first command rebuilt everything `npm ci` had just
// built (~45 s on two cores). The build is current when dist/cli.cjs and its code caches are newer
// than every input: src/, console/, scripts/, bin/, package.json, package-lock.json and the
// tsconfig files. Prints nothing when it skips.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const INPUTS = [
  'src',
  'console',
  'scripts',
  'bin',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
];

/** The newest mtime under a path (files and directories; node_modules never walked). */
function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let max = stat.mtimeMs;
  for (const entry of readdirSync(path)) {
    if (entry === 'node_modules') continue;
    max = Math.max(max, newest(join(path, entry)));
  }
  return max;
}

function built() {
  const outputs = [
    'cli.cjs',
    'cli-read.cjs',
    'cli-zod.cjs',
    'cli-yaml.cjs',
    join('cli-cache', 'other.bin'),
  ].map((file) => join(ROOT, 'dist', file));
  if (!outputs.every((file) => existsSync(file))) return 0;
  return Math.min(...outputs.map((file) => statSync(file).mtimeMs));
}

const inputs = Math.max(...INPUTS.map((p) => newest(join(ROOT, p))));
if (built() <= inputs) {
  const npm = process.env.npm_execpath;
  const result = npm
    ? spawnSync(process.execPath, [npm, 'run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' })
    : spawnSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
  process.exitCode = result.status ?? 1;
}
