/**
 * The rules of issue 13 over one scan of `src/`:
 * - no folder imports another in a cycle;
 * - a centre file imports only centre files, `src/core/`, `zod`, `node:crypto` and `node:path`;
 * - no SQL text, no `better-sqlite3`/`pg` and no `src/store/db.ts`/`postgres/pg.ts` outside the store (the composition root
 *   may open the database);
 * - only the composition root builds the database, stores, servers, dispatcher, runners (root.ts);
 * - a centre file reaches no I/O global (`process`, `fetch`, `require`, `globalThis`, … : scope.ts);
 * - every `import()` / `require()` names its module by a literal, so the graph sees it;
 * - no getter or setter over 80 lines (Biome's function rule does not count them);
 * - no file over 400 lines as `wc -l` counts them (Biome's file rule leaves some lines out).
 */
import { basename } from 'node:path';
import { edgeKey, type FolderGraph, folderCycles } from './graph.js';
import { isRootFile } from './root.js';
import { ACCESSOR_MAX_LINES, FILE_MAX_LINES, type ImportRef, type Scan } from './scan.js';

export interface Violation {
  rule:
    | 'folder-cycle'
    | 'centre-import'
    | 'centre-global'
    | 'sql-outside-store'
    | 'store-access'
    | 'composition-root'
    | 'dynamic-import'
    | 'accessor-size'
    | 'file-size'
    | 'docs';
  message: string;
}

/** A centre file: under `src/core/`, or a rules or plan file anywhere under `src/`. */
/**
 * Plain vocabulary outside core/ that rules files build on: the connector's names (tools, tiers,
 * scopes, codes) and its grant types. Centre files themselves: they import nothing but each other.
 */
const CENTRE_DATA = new Set(['src/connector/names.ts', 'src/connector/grant.ts']);

export function isCentre(path: string): boolean {
  if (!path.startsWith('src/')) return false;
  if (path.startsWith('src/core/') || CENTRE_DATA.has(path)) return true;
  return /^(?:rules|.+-rules|plan-.+|.+-plan)\.(?:[cm]?[jt]s|[jt]sx)$/.test(basename(path));
}

/** Where the database may be named: the store, and the composition root that opens it. */
export function mayOpenStore(path: string): boolean {
  return path.startsWith('src/store/') || isRootFile(path);
}

const CENTRE_PACKAGES = /^zod(?:\/|$)/;
const CENTRE_BUILTINS = new Set(['node:crypto', 'node:path', 'node:path/posix', 'node:path/win32']);

export function cycleViolations(graph: FolderGraph): Violation[] {
  return folderCycles(graph).map(({ folders, cycle }) => {
    const lines = [`folders import each other in a cycle: ${cycle.join(' -> ')}`];
    for (const from of folders) {
      for (const to of folders) {
        const refs = graph.edges.get(edgeKey(from, to));
        if (!refs) continue;
        lines.push(`  ${edgeKey(from, to)}:`);
        for (const ref of refs) lines.push(`    ${describeImport(ref)}`);
      }
    }
    return { rule: 'folder-cycle', message: lines.join('\n') };
  });
}

export function centreViolations(scan: Scan): Violation[] {
  const out: Violation[] = [];
  for (const ref of scan.imports) {
    if (!isCentre(ref.from)) continue;
    const why = centreRefusal(ref);
    if (why) out.push({ rule: 'centre-import', message: `centre file ${describeImport(ref)}: ${why}` });
  }
  return out;
}

function centreRefusal(ref: ImportRef): string | null {
  if (ref.target !== null) {
    if (isCentre(ref.target)) return null;
    if (!ref.target.startsWith('src/')) return `${ref.target} is outside src/`;
    return `${ref.target} is an adapter (the centre imports only src/core/ and rules/plan files)`;
  }
  const module = ref.module ?? ref.specifier;
  if (module.startsWith('node:')) {
    if (CENTRE_BUILTINS.has(module)) return null;
    return `${module} is a Node builtin the centre may not use (only node:crypto and node:path)`;
  }
  if (CENTRE_PACKAGES.test(module)) return null;
  return `the package ${module} is not allowed in the centre (only zod)`;
}

export function storeViolations(scan: Scan): Violation[] {
  const out: Violation[] = [];
  for (const ref of scan.imports) {
    if (mayOpenStore(ref.from)) continue;
    const driver = ['better-sqlite3', 'pg'].find((m) => ref.module === m || ref.module?.startsWith(`${m}/`));
    if (driver) {
      out.push({
        rule: 'store-access',
        message: `${describeImport(ref)}: ${driver} outside src/store/`,
      });
    } else if (ref.target === 'src/store/db.ts' || ref.target === 'src/store/postgres/pg.ts') {
      out.push({
        rule: 'store-access',
        message: `${describeImport(ref)}: the database (Db) outside src/store/`,
      });
    }
  }
  return out;
}

export function sqlViolations(scan: Scan): Violation[] {
  const byFile = new Map<string, typeof scan.sql>();
  for (const hit of scan.sql) {
    if (hit.file.startsWith('src/store/')) continue;
    byFile.set(hit.file, [...(byFile.get(hit.file) ?? []), hit]);
  }
  return [...byFile].map(([file, hits]) => {
    const lines = [
      `${file} contains SQL outside src/store/ (${hits.length === 1 ? '1 literal' : `${hits.length} literals`}):`,
    ];
    for (const hit of hits) lines.push(`  line ${hit.line}: ${excerpt(hit.text)}`);
    return { rule: 'sql-outside-store', message: lines.join('\n') };
  });
}

export function centreGlobalViolations(scan: Scan): Violation[] {
  return scan.globals.map((hit) => ({
    rule: 'centre-global',
    message: `centre file ${hit.file}:${hit.line} uses the global ${hit.text}: the centre reaches no I/O through globals (process, fetch, require, globalThis, XMLHttpRequest, WebSocket); take what it needs as an argument or a port`,
  }));
}

/**
 * `import(…)` / `require(…)` of a computed module: the folder graph and every import rule would miss
 * what it loads. None in `src/` today (the CLI's lazy command imports name their modules literally);
 * should one ever be needed, allow it here by file and by the call's text, with the reason.
 */
const DYNAMIC_IMPORTS_ALLOWED: ReadonlyArray<{ file: string; text: string }> = [];

export function dynamicImportViolations(scan: Scan): Violation[] {
  return scan.dynamicImports
    .filter((hit) => !DYNAMIC_IMPORTS_ALLOWED.some((a) => a.file === hit.file && a.text === hit.text))
    .map((hit) => ({
      rule: 'dynamic-import',
      message: `${hit.file}:${hit.line} ${excerpt(hit.text)}: the module is not a literal, so no rule can see what it loads; name it with a string literal`,
    }));
}

export function accessorViolations(scan: Scan): Violation[] {
  return scan.accessors.map((hit) => ({
    rule: 'accessor-size',
    message: `${hit.file}:${hit.line} ${hit.text}: no getter or setter over ${ACCESSOR_MAX_LINES} lines (as no function); split it`,
  }));
}

export function fileSizeViolations(scan: Scan): Violation[] {
  return scan.longFiles.map((hit) => ({
    rule: 'file-size',
    message: `${hit.file} has ${hit.text}: no file over ${FILE_MAX_LINES} lines; split it along its phases`,
  }));
}

/** `src/a/x.ts:3 imports '../b/y.js' (type-only)`. */
export function describeImport(ref: ImportRef): string {
  return `${ref.from}:${ref.line} imports '${ref.specifier}'${ref.typeOnly ? ' (type-only)' : ''}`;
}

function excerpt(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 72 ? `${flat.slice(0, 69)}...` : flat;
}
