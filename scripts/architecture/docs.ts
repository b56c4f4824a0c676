/**
 * `docs/architecture.md` kept true to the code:
 * - its folder graph, the fenced block between `<!-- folder-graph:begin -->` and
 *   `<!-- folder-graph:end -->`, lists exactly the computed edges, as `a -> b` or `a -> b, c` lines
 *   (`--write-docs` regenerates it in the second form);
 * - its layout, the fenced block whose first line is `src/`, names every folder under `src/`: a
 *   top-level folder by a line starting `<name>/` (indented at most two spaces), a nested one by
 *   `<name>/` or `<parent>/<name>/` anywhere in its top-level folder's lines.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Violation } from './checks.js';

export const DOC = 'docs/architecture.md';
export const BEGIN = '<!-- folder-graph:begin -->';
export const END = '<!-- folder-graph:end -->';

/** Every folder under `src/` that holds a source file at some depth: `core`, `core/ports`, … */
export function srcFolders(files: readonly string[]): string[] {
  const folders = new Set<string>();
  for (const file of files) {
    const parts = file.split('/').slice(1, -1);
    for (let i = 1; i <= parts.length; i++) folders.add(parts.slice(0, i).join('/'));
  }
  return [...folders].sort();
}

export function docsViolations(
  root: string,
  edges: readonly string[],
  folders: readonly string[],
): Violation[] {
  const path = join(root, DOC);
  if (!existsSync(path)) return [{ rule: 'docs', message: `${DOC} is missing` }];
  const text = readFileSync(path, 'utf8');
  return [...graphViolations(text, edges), ...layoutViolations(text, folders)];
}

function graphViolations(text: string, edges: readonly string[]): Violation[] {
  const block = graphBlock(text);
  if (block === null) {
    return [
      {
        rule: 'docs',
        message: `${DOC} has no folder graph between ${BEGIN} and ${END} (--write-docs adds it)`,
      },
    ];
  }
  const listed = new Set(parseEdges(block));
  const actual = new Set(edges);
  const missing = edges.filter((e) => !listed.has(e));
  const extra = [...listed].filter((e) => !actual.has(e)).sort();
  const out: Violation[] = [];
  for (const e of missing)
    out.push({ rule: 'docs', message: `${DOC}'s folder graph lacks ${e} (an import makes it)` });
  for (const e of extra)
    out.push({ rule: 'docs', message: `${DOC}'s folder graph shows ${e}, which no import makes` });
  const last = out.at(-1);
  if (last)
    last.message += ' (node --import tsx scripts/check-architecture.ts --write-docs regenerates the block)';
  return out;
}

/** `a -> b` lines, or `a -> b, c, d` (the form the docs block is written in). */
export function parseEdges(block: string): string[] {
  return block.split('\n').flatMap((line) => {
    const m = /^\s*([\w.-]+)\s*->\s*([\w.-]+(?:\s*,\s*[\w.-]+)*)\s*$/.exec(line);
    return m ? (m[2] as string).split(',').map((to) => `${m[1]} -> ${to.trim()}`) : [];
  });
}

/** The edges grouped by their source: `a -> b, c, d`, one line per folder that imports another. */
export function groupedEdges(edges: readonly string[]): string[] {
  const targets = new Map<string, string[]>();
  for (const edge of edges) {
    const [from, to] = edge.split(' -> ') as [string, string];
    targets.set(from, [...(targets.get(from) ?? []), to]);
  }
  return [...targets].map(([from, tos]) => `${from} -> ${tos.join(', ')}`);
}

function graphBlock(text: string): string | null {
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END, begin + BEGIN.length);
  return begin === -1 || end === -1 ? null : text.slice(begin + BEGIN.length, end);
}

function layoutViolations(text: string, folders: readonly string[]): Violation[] {
  const layout = layoutBlock(text);
  if (layout === null) {
    return [{ rule: 'docs', message: `${DOC} has no layout (a fenced block whose first line is src/)` }];
  }
  const entries = layoutEntries(layout);
  return folders
    .filter((folder) => !named(folder, entries))
    .map((folder) => ({ rule: 'docs', message: `${DOC}'s layout does not name src/${folder}/` }));
}

/** The lines of the fenced block that starts with `src/`, without that line. */
function layoutBlock(text: string): string[] | null {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*```/.test(lines[i] as string) || lines[i + 1]?.trim() !== 'src/') continue;
    const end = lines.findIndex((line, j) => j > i + 1 && /^\s*```/.test(line));
    return lines.slice(i + 2, end === -1 ? undefined : end);
  }
  return null;
}

/** Top-level entries (a line indented at most two spaces) with the folder tokens of their lines. */
function layoutEntries(lines: readonly string[]): Array<{ key: string; tokens: string[] }> {
  const entries: Array<{ key: string; tokens: string[] }> = [];
  for (const line of lines) {
    const tokens = [...line.matchAll(/(?<![\w./-])((?:[\w.-]+\/)+)/g)].map((m) =>
      (m[1] as string).slice(0, -1),
    );
    const top = /^ {0,2}(\S+)/.exec(line);
    if (top) entries.push({ key: (top[1] as string).replace(/\/$/, ''), tokens });
    else entries.at(-1)?.tokens.push(...tokens);
  }
  return entries;
}

function named(folder: string, entries: ReadonlyArray<{ key: string; tokens: string[] }>): boolean {
  const [top] = folder.split('/') as [string];
  if (!folder.includes('/')) return entries.some((e) => e.key === top || e.key.startsWith(`${top}/`));
  return entries.some(
    (e) =>
      e.key === folder ||
      e.key.startsWith(`${folder}/`) ||
      ((e.key === top || e.key.startsWith(`${top}/`)) &&
        e.tokens.some((t) => t === folder || folder.endsWith(`/${t}`) || `${e.key}/${t}` === folder)),
  );
}

/** Replace the folder graph block with `edges` (or add a "Folder graph" section at the end). */
export function writeDocs(root: string, edges: readonly string[]): void {
  const path = join(root, DOC);
  const body = `${BEGIN}\n\`\`\`text\n${groupedEdges(edges).join('\n')}\n\`\`\`\n${END}`;
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Architecture\n';
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END, begin + BEGIN.length);
  const next =
    begin === -1 || end === -1
      ? `${text.replace(/\n*$/, '\n')}\n## Folder graph\n\n${body}\n`
      : text.slice(0, begin) + body + text.slice(end + END.length);
  writeFileSync(path, next);
}
