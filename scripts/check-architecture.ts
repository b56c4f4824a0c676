/**
 * The architecture check run by `npm run lint` (after biome). It reads every source file under `src/`
 * (`.ts`, `.tsx`, `.mts`, `.cts`, `.js`, `.mjs` … and whatever `tsconfig.build.json` compiles) once
 * and fails (exit 1, each violation named with its file, line and import) on:
 * - folders of `src/` that import each other in a cycle (`main.ts`, `main-*.ts`: one node);
 * - a centre file (under `src/core/`, or `rules.ts`, `*-rules.ts`, `plan-*.ts`, `*-plan.ts`) importing
 *   an adapter, a Node builtin other than `node:crypto`/`node:path`, or a package other than `zod`;
 * - a centre file using an I/O global: `process`, `fetch`, `require`, `globalThis`, `XMLHttpRequest`,
 *   `WebSocket` (unless a parameter or a declaration of its own scope holds the name);
 * - SQL text (upper-case statements, statements of full shape in any case, and any text handed to
 *   `.prepare(` / `.exec(` that starts like a statement), `better-sqlite3` or `src/store/db.ts` outside `src/store/` (the composition root may
 *   open the database);
 * - a call building the database, a store, a server, the gateway, the dispatcher, a runner or a tmux
 *   client (`openDb(`, `new Sqlite…(`, `startHttpServer(`, `new Dispatcher(`, `new Tmux(` …) outside
 *   the composition root (`src/main.ts`, `src/main-*.ts`), under its own name or an alias
 *   (`import { Dispatcher as D }`, a default export, a renamed re-export, `const T = Tmux`);
 * - an `import()` / `require()` whose module is not a literal (the graph cannot see it);
 * - a getter or setter over 80 lines (Biome's function-size rule skips them);
 * - `docs/architecture.md` out of step: its folder graph block differs from the imports, or its
 *   layout leaves a folder of `src/` unnamed.
 *
 *   node --import tsx scripts/check-architecture.ts [--root <dir>] [--print | --write-docs]
 *
 * `--print` writes the folder graph (`a -> b`, sorted) and checks nothing; `--write-docs` regenerates
 * the docs' folder graph block, then checks.
 */
import { resolve } from 'node:path';
import {
  accessorViolations,
  centreGlobalViolations,
  centreViolations,
  cycleViolations,
  dynamicImportViolations,
  fileSizeViolations,
  sqlViolations,
  storeViolations,
  type Violation,
} from './architecture/checks.js';
import { docsViolations, srcFolders, writeDocs } from './architecture/docs.js';
import { edgeLines, folderGraph } from './architecture/graph.js';
import { rootViolations } from './architecture/root.js';
import { scanSources } from './architecture/scan.js';

interface Options {
  root: string;
  print: boolean;
  writeDocs: boolean;
}

function parseArgs(argv: readonly string[]): Options {
  const options: Options = { root: process.cwd(), print: false, writeDocs: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--print') options.print = true;
    else if (arg === '--write-docs') options.writeDocs = true;
    else if (arg === '--root' && argv[i + 1]) options.root = resolve(argv[++i] as string);
    else {
      process.stderr.write(
        `check-architecture: unknown argument ${arg}\nusage: check-architecture [--root <dir>] [--print | --write-docs]\n`,
      );
      process.exit(2);
    }
  }
  return options;
}

function main(): void {
  const started = performance.now();
  const options = parseArgs(process.argv.slice(2));
  const scan = scanSources(options.root);
  if (scan.files.length === 0) {
    process.stderr.write(`architecture: no source files under ${options.root}/src\n`);
    process.exit(1);
  }
  const graph = folderGraph(scan.files, scan.imports);
  const edges = edgeLines(graph);
  if (options.print) {
    process.stdout.write(edges.map((e) => `${e}\n`).join(''));
    return;
  }
  if (options.writeDocs) {
    writeDocs(options.root, edges);
    process.stdout.write(
      `architecture: wrote the folder graph (${edges.length} edges) into docs/architecture.md\n`,
    );
  }
  const violations: Violation[] = [
    ...cycleViolations(graph),
    ...centreViolations(scan),
    ...centreGlobalViolations(scan),
    ...storeViolations(scan),
    ...sqlViolations(scan),
    ...rootViolations(scan.calls),
    ...dynamicImportViolations(scan),
    ...accessorViolations(scan),
    ...fileSizeViolations(scan),
    ...docsViolations(options.root, edges, srcFolders(scan.files)),
  ];
  const ms = Math.round(performance.now() - started);
  const summary = `${scan.files.length} files, ${graph.nodes.length} folders, ${edges.length} edges, ${ms} ms`;
  if (violations.length === 0) {
    process.stdout.write(
      `architecture: ok (${summary}): no folder cycle, a pure centre, SQL only in src/store/, one composition root, docs in step\n`,
    );
    return;
  }
  for (const v of violations) process.stderr.write(`architecture [${v.rule}] ${v.message}\n`);
  process.stderr.write(`architecture: ${countBy(violations)} (${summary})\n`);
  process.exitCode = 1;
}

function countBy(violations: readonly Violation[]): string {
  const counts = new Map<string, number>();
  for (const v of violations) counts.set(v.rule, (counts.get(v.rule) ?? 0) + 1);
  return [...counts].map(([rule, n]) => `${n} ${rule}`).join(', ');
}

main();
