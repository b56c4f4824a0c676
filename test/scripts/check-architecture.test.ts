import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

/**
 * `scripts/check-architecture.ts` run for real, as `npm run lint` runs it, on small source trees
 * written to a temporary directory (`--root`).
 */
const SCRIPT = join(ROOT, 'scripts/check-architecture.ts');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-arch-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

function check(root: string, ...args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', SCRIPT, '--root', root, ...args],
      { cwd: ROOT, timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') reject(error);
        else resolve({ code: error ? (error.code as number) : 0, stdout, stderr });
      },
    );
  });
}

/** docs/architecture.md naming `folders` in its layout and listing `edges` as its folder graph. */
function doc(folders: readonly string[], edges: readonly string[]): string {
  return [
    '# Architecture',
    '',
    '```',
    'src/',
    ...folders.map((f) => `  ${f}/  what it holds`),
    '  main.ts  composition root',
    '```',
    '',
    '## Folder graph',
    '',
    '<!-- folder-graph:begin -->',
    '```text',
    ...edges,
    '```',
    '<!-- folder-graph:end -->',
    '',
  ].join('\n');
}

/** A small tree that keeps every rule: a centre, adapters around it, SQL in the store. */
const CLEAN: Record<string, string> = {
  'src/main.ts': [
    "import { openDb } from './store/db.js';",
    "import { serve } from './web/server.js';",
    "import { holdIfOver } from './ledger/budget-rules.js';",
    'serve(openDb(), holdIfOver);',
  ].join('\n'),
  'src/main-base.ts': "export { openDb } from './store/db.js';\n",
  'src/core/errors.ts': "import { z } from 'zod';\nexport const Code = z.enum(['a', 'b']);\n",
  'src/core/ports/ledger.ts': 'export interface LedgerPort { total(): Promise<number> }\n',
  'src/ledger/budget-rules.ts': [
    "import { createHash } from 'node:crypto';",
    "import { join } from 'node:path';",
    "import type { LedgerPort } from '../core/ports/ledger.js';",
    "import { Code } from '../core/errors.js';",
    'export const holdIfOver = (l: LedgerPort) => [createHash, join, Code, l];',
  ].join('\n'),
  'src/guard/sandbox-plan.ts':
    "import { holdIfOver } from '../ledger/budget-rules.js';\nexport const p = holdIfOver;\n",
  'src/store/db.ts': [
    "import Database from 'better-sqlite3';",
    'export type Db = Database.Database;',
    "export const openDb = (): Db => new Database(':memory:');",
  ].join('\n'),
  'src/store/sqlite/ledger.ts': [
    "import type { Db } from '../db.js';",
    "import type { LedgerPort } from '../../core/ports/ledger.js';",
    'export const total = (db: Db) =>',
    `  db.prepare(\`SELECT SUM(cost) FROM usage_ledger WHERE at >= \${'?'}\`).get();`,
    'export type L = LedgerPort;',
  ].join('\n'),
  'src/web/server.ts': [
    "import { createServer } from 'node:http';",
    "import { Code } from '../core/errors.js';",
    'export const serve = (...a: unknown[]) => [createServer, Code, a];',
  ].join('\n'),
};
const CLEAN_FOLDERS = ['core', 'core/ports', 'guard', 'ledger', 'store', 'store/sqlite', 'web'];
const CLEAN_EDGES = [
  'guard -> ledger',
  'ledger -> core',
  'main -> ledger, store, web',
  'store -> core',
  'web -> core',
];

const cleanTree = (extra: Record<string, string> = {}, docText?: string) =>
  tree({ ...CLEAN, 'docs/architecture.md': docText ?? doc(CLEAN_FOLDERS, CLEAN_EDGES), ...extra });

describe('check-architecture', () => {
  it('passes a tree that keeps every rule, and prints its folder graph sorted', async () => {
    const root = cleanTree();
    const run = await check(root);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^architecture: ok \(9 files, 6 folders, 7 edges, \d+ ms\)/);
    const printed = await check(root, '--print');
    expect(printed.code).toBe(0);
    expect(printed.stdout.trim().split('\n')).toEqual([
      'guard -> ledger',
      'ledger -> core',
      'main -> ledger',
      'main -> store',
      'main -> web',
      'store -> core',
      'web -> core',
    ]);
  });

  it('fails on folders that import each other in a cycle, naming every import of it', async () => {
    const root = cleanTree(
      {
        'src/web/server.ts': "import { total } from '../ledger/report.js';\nexport const serve = total;\n",
        'src/ledger/report.ts':
          "import type { Page } from '../web/page.js';\nexport const total = (p: Page) => p;\n",
        'src/web/page.ts': 'export type Page = string;\n',
      },
      doc(
        CLEAN_FOLDERS,
        [...CLEAN_EDGES, 'ledger -> web', 'web -> ledger'].filter((e) => e !== 'web -> core'),
      ),
    );
    const run = await check(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      '[folder-cycle] folders import each other in a cycle: ledger -> web -> ledger',
    );
    expect(run.stderr).toContain("src/ledger/report.ts:1 imports '../web/page.js' (type-only)");
    expect(run.stderr).toContain("src/web/server.ts:1 imports '../ledger/report.js'");
    expect(run.stderr).toMatch(/architecture: 1 folder-cycle \(/);
  });

  it('counts the root files as one folder, main: a folder importing them back is a cycle', async () => {
    const root = cleanTree({
      'src/main-parts.ts': "import { serve } from './web/server.js';\nexport const parts = serve;\n",
      'src/web/server.ts': "import { openDb } from '../main-base.js';\nexport const serve = openDb;\n",
    });
    const run = await check(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('folders import each other in a cycle: main -> web -> main');
    expect(run.stderr).toContain("src/web/server.ts:1 imports '../main-base.js'");
  });

  it('fails on a centre file importing an adapter, by value or by type only', async () => {
    const root = cleanTree({
      'src/core/plan-turn.ts': "import type { Db } from '../store/db.js';\nexport type T = Db;\n",
      'src/ledger/budget-rules.ts':
        "import { serve } from '../web/server.js';\nexport const holdIfOver = serve;\n",
      'src/sessions/rules.ts': "export { serve } from '../web/server.js';\n",
    });
    const run = await check(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "[centre-import] centre file src/core/plan-turn.ts:1 imports '../store/db.js' (type-only): src/store/db.ts is an adapter",
    );
    expect(run.stderr).toContain(
      "[centre-import] centre file src/ledger/budget-rules.ts:1 imports '../web/server.js': src/web/server.ts is an adapter",
    );
    expect(run.stderr).toContain("centre file src/sessions/rules.ts:1 imports '../web/server.js'");
    // The adapters themselves may import what they like.
    expect(run.stderr).not.toContain('centre file src/web/');
  });

  it('fails on a centre file using node I/O or a package other than zod', async () => {
    const root = cleanTree({
      'src/core/text.ts': [
        "import { readFileSync } from 'node:fs';",
        "import { spawn } from 'child_process';",
        "import { parse } from 'yaml';",
        "export const load = async () => [readFileSync, spawn, parse, await import('node:net')];",
      ].join('\n'),
    });
    const run = await check(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "centre file src/core/text.ts:1 imports 'node:fs': node:fs is a Node builtin",
    );
    expect(run.stderr).toContain(
      "centre file src/core/text.ts:2 imports 'child_process': node:child_process",
    );
    expect(run.stderr).toContain(
      "centre file src/core/text.ts:3 imports 'yaml': the package yaml is not allowed",
    );
    expect(run.stderr).toContain("centre file src/core/text.ts:4 imports 'node:net'");
    expect(run.stderr).toMatch(/architecture: 4 centre-import \(/);
  });

  it('fails on SQL, better-sqlite3 or the Db outside the store', async () => {
    const root = cleanTree({
      'src/ledger/report.ts': [
        "import type { Db } from '../store/db.js';",
        'export const byKey = (db: Db, key: string) =>',
        `  db.prepare(\`SELECT \${key} AS key, COUNT(*) AS n`,
        '    FROM usage_ledger GROUP BY 1`).all();',
        "export const clear = 'DELETE FROM ' + 'usage_ledger WHERE at < ?';",
        "export const pieces = ['INSERT INTO', 'x'].join(' ');",
      ].join('\n'),
      'src/web/tokens.ts':
        "import Database from 'better-sqlite3';\nexport const open = () => new Database('x');\n",
    });
    const run = await check(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      '[sql-outside-store] src/ledger/report.ts contains SQL outside src/store/ (3 literals):',
    );
    expect(run.stderr).toContain('  line 3: SELECT ? AS key, COUNT(*) AS n FROM usage_ledger GROUP BY 1');
    expect(run.stderr).toContain('  line 5: DELETE FROM usage_ledger WHERE at < ?');
    expect(run.stderr).toContain('  line 6: INSERT INTO');
    expect(run.stderr).toContain(
      "[store-access] src/ledger/report.ts:1 imports '../store/db.js' (type-only): the database (Db) outside src/store/",
    );
    expect(run.stderr).toContain("[store-access] src/web/tokens.ts:1 imports 'better-sqlite3'");
    // The same SQL in the store, and the composition root opening the database, are fine.
    expect(run.stderr).not.toMatch(/src\/store\/\S+ contains SQL/);
    expect(run.stderr).not.toMatch(/\[store-access\] src\/(main|store)/);
  });

  it('fails on a database, store, server, dispatcher, runner or tmux client built outside the composition root', async () => {
    const root = cleanTree({
      'src/web/console.ts': [
        '// Definitions, comments and strings are no calls: new Tmux( openDb(',
        'export class Tmux { constructor(readonly socket?: string) {} }',
        "export function openDb(path = ':memory:') { return path; }",
        "export const text = 'new Dispatcher( startHttpServer(';",
        'export const tmux = new Tmux();',
        "export const db = openDb('x');",
        'export const server = startHttpServer({ port: 0 });',
        'export const runners = [new ProcessRunner({}), new TmuxRunner({})];',
        'export const dispatcher = new Dispatcher({ inbox: new SqliteInbox(db) });',
        'export const viaNamespace = [store.openDb(), new runners.Tmux()];',
        'export const others = [new Map(), serve(), new Tmuxed()];',
      ].join('\n'),
      // The store building its own part is fine; opening a database there is not.
      'src/store/sqlite/ledger-import.ts': [
        'export class SqliteLedgerImport {}',
        'export const begin = () => new SqliteLedgerImport();',
        "export const reopen = () => openDb('again');",
      ].join('\n'),
      // Every root file may build them.
      'src/main-run.ts': [
        "import { serve } from './web/server.js';",
        'export const run = () => [serve, startHttpServer({}), new Dispatcher({}), new Tmux(), openDb()];',
      ].join('\n'),
      'src/web/main-like.ts': 'export const notRoot = () => new TmuxRunner({});\n',
    });
    const run = await check(root);
    expect(run.code).toBe(1);
    const found = run.stderr.split('\n').filter((line) => line.includes('[composition-root]'));
    const only = 'only the composition root (src/main.ts, src/main-*.ts) builds';
    expect(found).toEqual([
      `architecture [composition-root] src/store/sqlite/ledger-import.ts:3 calls openDb(…): ${only} a database; ask it for one`,
      `architecture [composition-root] src/web/console.ts:5 calls new Tmux(…): ${only} a tmux client; ask it for one`,
      `architecture [composition-root] src/web/console.ts:6 calls openDb(…): ${only} a database; ask it for one`,
      `architecture [composition-root] src/web/console.ts:7 calls startHttpServer(…): ${only} an HTTP server; ask it for one`,
      `architecture [composition-root] src/web/console.ts:8 calls new ProcessRunner(…): ${only} a runner; ask it for one`,
      `architecture [composition-root] src/web/console.ts:8 calls new TmuxRunner(…): ${only} a runner; ask it for one`,
      `architecture [composition-root] src/web/console.ts:9 calls new Dispatcher(…): ${only} a dispatcher; ask it for one`,
      `architecture [composition-root] src/web/console.ts:9 calls new SqliteInbox(…): ${only} a SQLite store; ask it for one`,
      `architecture [composition-root] src/web/console.ts:10 calls openDb(…): ${only} a database; ask it for one`,
      `architecture [composition-root] src/web/console.ts:10 calls new Tmux(…): ${only} a tmux client; ask it for one`,
      `architecture [composition-root] src/web/main-like.ts:1 calls new TmuxRunner(…): ${only} a runner; ask it for one`,
    ]);
    expect(run.stderr).toMatch(/architecture: 11 composition-root \(13 files/);
  });

  it('does not take prose, HTTP method names or comments for SQL', async () => {
    const root = cleanTree({
      'src/web/routes.ts': [
        '// SELECT * FROM sessions would be SQL, but this is a comment.',
        "export const methods = ['GET', 'POST', 'DELETE', 'UPDATE', 'PATCH'];",
        "export const help = 'Select a session from the list, then delete from the queue what you do not need.';",
        `export const hint = \`Update the config: set \${'dispatch'} and insert into it a new engine.\`;`,
        "export const upper = 'DELETE the row? UPDATE it? SELECT nothing.';",
        "export const pragma = 'pragma: no-cache';",
      ].join('\n'),
    });
    const run = await check(root);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });

  it('fails when the docs graph misses or invents an edge, or the layout misses a folder; --write-docs mends the graph', async () => {
    const root = cleanTree(
      {},
      doc(
        CLEAN_FOLDERS.filter((f) => f !== 'guard' && f !== 'store/sqlite'),
        [...CLEAN_EDGES.filter((e) => e !== 'web -> core'), 'core -> web'],
      ),
    );
    const run = await check(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "docs/architecture.md's folder graph lacks web -> core (an import makes it)",
    );
    expect(run.stderr).toContain(
      "docs/architecture.md's folder graph shows core -> web, which no import makes",
    );
    expect(run.stderr).toContain("docs/architecture.md's layout does not name src/guard/");
    expect(run.stderr).toContain("docs/architecture.md's layout does not name src/store/sqlite/");

    const mended = await check(root, '--write-docs');
    expect(mended.stdout).toContain('wrote the folder graph (7 edges) into docs/architecture.md');
    expect(mended.stderr).not.toContain('folder graph');
    expect(mended.stderr).toContain('layout does not name src/guard/');
    const text = readFileSync(join(root, 'docs/architecture.md'), 'utf8');
    expect(text).toContain(
      [
        '<!-- folder-graph:begin -->',
        '```text',
        'guard -> ledger',
        'ledger -> core',
        'main -> ledger, store, web',
        'store -> core',
        'web -> core',
        '```',
        '<!-- folder-graph:end -->',
      ].join('\n'),
    );
  });

  it('names a nested folder by its own name inside its parent, and a docs file without the block fails', async () => {
    const layout = [
      '```',
      'src/',
      '  core/   errors · ports/ (the port interfaces)',
      '  guard/ plan',
      '  ledger/ rules',
      '  store/  db',
      '          sqlite/ one owner per table',
      '  web/    server',
      '```',
    ].join('\n');
    const root = cleanTree({}, `# Architecture\n\n${layout}\n`);
    const run = await check(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      'docs/architecture.md has no folder graph between <!-- folder-graph:begin -->',
    );
    expect(run.stderr).not.toContain('layout does not name');
    await check(root, '--write-docs');
    expect(await check(root)).toMatchObject({ code: 0, stderr: '' });
  });

  it('reads .tsx, .mjs and .js files under src/ and what tsconfig.build.json compiles, as it reads .ts', async () => {
    const bad = {
      'tsconfig.build.json': JSON.stringify({
        compilerOptions: { allowJs: true, jsx: 'preserve' },
        include: ['src'],
      }),
      'src/core/view.tsx':
        "import { readFileSync } from 'node:fs';\nexport const View = () => <p>{String(readFileSync)}</p>;\n",
      'src/web/legacy.mjs': "export const purge = (db) => db.prepare('DELETE FROM usage_ledger');\n",
      'src/web/old.js': 'export const tmux = () => new Tmux();\n',
    };
    const run = await check(cleanTree(bad));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("centre file src/core/view.tsx:1 imports 'node:fs'");
    expect(run.stderr).toContain('[sql-outside-store] src/web/legacy.mjs contains SQL outside src/store/');
    expect(run.stderr).toContain('[composition-root] src/web/old.js:1 calls new Tmux(…)');
    expect(run.stdout + run.stderr).toMatch(/\(12 files,/);

    const good = await check(
      cleanTree({
        'tsconfig.build.json': bad['tsconfig.build.json'],
        'src/core/view.tsx': 'export const View = (p: { text: string }) => <p>{p.text}</p>;\n',
        'src/web/legacy.mjs': 'export const purge = (ledger) => ledger.purge();\n',
        'src/web/old.js': 'export const tmux = (root) => root.tmux();\n',
      }),
    );
    expect(good).toMatchObject({ code: 0, stderr: '' });
  });

  it('follows a root-only constructor or factory under another name: renamed, default, re-exported, namespaced, aliased', async () => {
    const hub = {
      'src/web/tmux.ts': 'export class Tmux {}\n',
      'src/web/hub.ts': [
        'export class Dispatcher {}',
        'export default Dispatcher;',
        "export { Tmux as Mux } from './tmux.js';",
      ].join('\n'),
    };
    const uses = (from: string) =>
      [
        `import Hub, { Dispatcher as D, Mux } from '${from}hub.js';`,
        `import * as hub from '${from}hub.js';`,
        `import { Tmux as T } from '${from}tmux.js';`,
        'const Alias = hub.Mux;',
        'const { Dispatcher: Picked } = hub;',
        'export const built = () => [new D({}), new Hub(),',
        '  new Mux(), new hub.Mux(), new Alias(), new Picked(), new T(), new hub.Dispatcher()];',
      ].join('\n');
    const run = await check(cleanTree({ ...hub, 'src/web/console.ts': uses('./') }));
    expect(run.code).toBe(1);
    const found = run.stderr.split('\n').filter((line) => line.includes('[composition-root]'));
    expect(found.map((line) => /calls (.*?): only/.exec(line)?.[1])).toEqual([
      'new D(…) (D is Dispatcher)',
      'new Hub(…) (Hub is Dispatcher)',
      'new Dispatcher(…)',
      'new Mux(…) (Mux is Tmux)',
      'new hub.Mux(…) (hub.Mux is Tmux)',
      'new Alias(…) (Alias is Tmux)',
      'new Picked(…) (Picked is Dispatcher)',
      'new T(…) (T is Tmux)',
    ]);
    expect(found[0]).toContain(
      'src/web/console.ts:6 calls new D(…) (D is Dispatcher): only the composition root',
    );

    // The same calls in a root file are fine.
    const good = await check(cleanTree({ ...hub, 'src/main-console.ts': uses('./web/') }));
    expect(good).toMatchObject({ code: 0, stderr: '' });
  });

  it('refuses an import() or require() whose module is not a literal', async () => {
    const run = await check(
      cleanTree({
        'src/web/lazy.ts': [
          'declare const require: (m: string) => unknown;',
          'export const load = (name: string) => [',
          `  import(\`../store/\${name}.js\`),`,
          '  import(name),',
          '  require(name),',
          "  import('./server.js'),",
          '];',
        ].join('\n'),
      }),
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `[dynamic-import] src/web/lazy.ts:3 import(\`../store/\${name}.js\`): the module is not a literal`,
    );
    expect(run.stderr).toContain('[dynamic-import] src/web/lazy.ts:4 import(name)');
    expect(run.stderr).toContain('[dynamic-import] src/web/lazy.ts:5 require(name)');
    expect(run.stderr).toMatch(/architecture: 3 dynamic-import \(/);

    const good = await check(
      cleanTree({
        'src/web/lazy.ts': "export const load = () => [import('./server.js'), import(`./server.js`)];\n",
      }),
    );
    expect(good).toMatchObject({ code: 0, stderr: '' });
  });

  it('takes lower-case SQL for SQL: statements of full shape, and what .prepare( / .exec( get', async () => {
    const sql = [
      'export const q = (db: { prepare(s: string): unknown; exec(s: string): unknown }, t: string) => [',
      "  db.prepare('select 1'),",
      "  db.exec('pragma foreign_keys = on'),",
      `  db.exec(\`  begin; \${t}\`),`,
      "  'select id, name from sessions where id = ?',",
      "  'delete from jobs where id = ?',",
      "  'insert into usage (a, b) values (?, ?)',",
      "  'update jobs set state = ?',",
      "  'create table if not exists notes (id)',",
      '];',
    ].join('\n');
    const run = await check(cleanTree({ 'src/web/q.ts': sql }));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('src/web/q.ts contains SQL outside src/store/ (8 literals):');
    for (const line of [2, 3, 4, 5, 6, 7, 8, 9]) expect(run.stderr).toMatch(new RegExp(`  line ${line}: `));

    const good = await check(
      cleanTree({
        'src/store/sqlite/q.ts': sql,
        'src/web/prose.ts': [
          "export const a = 'Select a session from the list where it ended, then delete from the queue.';",
          "export const b = 'Update your config: set the engine = claude, and create table-like output.';",
          "export const c = /select (\\w+)/.exec('selected: x');",
          "export const d = 'select one from each list where you can';",
        ].join('\n'),
      }),
    );
    expect(good).toMatchObject({ code: 0, stderr: '' });
  });

  it('fails on a centre file reaching I/O through a global, not on a name its own scope declares', async () => {
    const run = await check(
      cleanTree({
        'src/core/env.ts': [
          'export const home = () => process.env.HOME;',
          'export const get = (url: string) => fetch(url);',
          'export const g = globalThis;',
          "export const ws = () => new WebSocket('ws://x');",
          'export const platform = process.platform;',
          'export const all = { process };',
        ].join('\n'),
      }),
    );
    expect(run.code).toBe(1);
    const found = run.stderr.split('\n').filter((line) => line.includes('[centre-global]'));
    expect(
      found.map((line) => /centre file (\S+) uses the global (\w+)/.exec(line)?.slice(1).join(' ')),
    ).toEqual([
      'src/core/env.ts:1 process',
      'src/core/env.ts:2 fetch',
      'src/core/env.ts:3 globalThis',
      'src/core/env.ts:4 WebSocket',
      'src/core/env.ts:5 process',
      'src/core/env.ts:6 process',
    ]);

    const good = await check(
      cleanTree({
        'src/core/env.ts': [
          'export const get = (fetch: (u: string) => Promise<unknown>, url: string) => fetch(url);',
          'export type Fetch = typeof fetch;',
          'export const o = { process: 1, fetch: 2 };',
          'export const p = o.process + o.fetch;',
          'export function f() {',
          '  const process = { env: {} as Record<string, string> };',
          '  return process.env;',
          '}',
          'export class C { globalThis = 1; fetch() { return this.globalThis; } }',
        ].join('\n'),
        // Adapters may use them.
        'src/web/env.ts': 'export const home = () => process.env.HOME ?? fetch;\n',
      }),
    );
    expect(good).toMatchObject({ code: 0, stderr: '' });
  });

  it('fails on a getter or setter over 80 lines', async () => {
    const accessor = (kind: 'get' | 'set', lines: number) => [
      `  ${kind} value(${kind === 'set' ? 'v: number' : ''})${kind === 'get' ? ': number' : ''} {`,
      '    let n = 0;',
      ...Array.from({ length: lines - 4 }, () => '    n++;'),
      kind === 'get' ? '    return n;' : '    this.n = v + n;',
      '  }',
    ];
    const big = (lines: number) =>
      ['export class Big {', '  n = 0;', ...accessor('get', lines), ...accessor('set', lines), '}'].join(
        '\n',
      );
    const run = await check(cleanTree({ 'src/web/big.ts': big(81) }));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      '[accessor-size] src/web/big.ts:3 get value (81 lines): no getter or setter over 80 lines',
    );
    expect(run.stderr).toContain('[accessor-size] src/web/big.ts:84 set value (81 lines)');

    expect(await check(cleanTree({ 'src/web/big.ts': big(80) }))).toMatchObject({ code: 0, stderr: '' });
  });

  it('fails on a file over 400 lines as wc -l counts them, comments and blank lines included', async () => {
    const long = (lines: number) =>
      `${Array.from({ length: lines }, (_, k) => (k % 3 === 0 ? '// a comment' : k % 3 === 1 ? '' : `export const v${k} = ${k};`)).join('\n')}\n`;
    const run = await check(cleanTree({ 'src/web/long.ts': long(401) }));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('[file-size] src/web/long.ts has 401 lines: no file over 400 lines');
    expect(await check(cleanTree({ 'src/web/long.ts': long(400) }))).toMatchObject({ code: 0, stderr: '' });
  });
});
