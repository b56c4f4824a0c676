/**
 * The files the check reads: every source file under `src/` that a compiler could take — `.ts`,
 * `.tsx`, `.mts`, `.cts`, `.js`, `.jsx`, `.mjs`, `.cjs`, not declarations — together with every file
 * `tsc -p tsconfig.build.json` compiles (its `include`, `files` and `allowJs`, parsed as tsc parses
 * them), so that no file the build ships escapes the rules by its extension or its place.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { type TS, ts } from './ts.js';

const SOURCE = /\.(?:[cm]?[jt]s|[jt]sx)$/;
const DECLARATION = /\.d\.(?:[cm]?ts|[^.]+\.ts)$/;

export const isSource = (name: string): boolean => SOURCE.test(name) && !DECLARATION.test(name);

/** Relative to the root, posix separators, sorted. */
export function sourceFiles(root: string): string[] {
  const files = new Set(walk(root, 'src'));
  for (const file of buildFiles(root)) files.add(file);
  return [...files].sort();
}

function walk(root: string, dir: string): string[] {
  if (!existsSync(join(root, dir))) return [];
  const out: string[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...walk(root, path));
    else if (entry.isFile() && isSource(entry.name)) out.push(path);
  }
  return out;
}

/** What `tsc -p tsconfig.build.json` compiles, inside the root; nothing when there is no such file. */
function buildFiles(root: string): string[] {
  const config = join(root, 'tsconfig.build.json');
  if (!existsSync(config)) return [];
  const parsed = ts.getParsedCommandLineOfConfigFile(config, undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: () => {},
  });
  return (parsed?.fileNames ?? [])
    .map((file) => relative(root, file).split(sep).join('/'))
    .filter((file) => !file.startsWith('..') && isSource(file));
}

/** How to parse a file: by its extension. */
export function scriptKind(file: string): TS.ScriptKind {
  if (file.endsWith('.tsx')) return ts.ScriptKind.TSX;
  if (file.endsWith('.jsx')) return ts.ScriptKind.JSX;
  if (/\.[cm]?js$/.test(file)) return ts.ScriptKind.JS;
  return ts.ScriptKind.TS;
}
