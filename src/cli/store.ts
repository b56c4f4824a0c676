import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { LoopError } from '../core/errors.js';
import type { CopyReport } from '../core/ports/copy.js';
import { type Base, registryPath } from '../main-base.js';
import { formatInt, oneLine, table, toJson } from './format.js';
import { EXIT, type Io } from './io.js';
import type { ProgramContext } from './program-context.js';

/** `store migrate`: opening the store brings it to this version; says where it is and which version. */
async function storeMigrate(base: Base, io: Io, opts: { json?: boolean }): Promise<number> {
  const { version, latest } = await base.stores.schema();
  const answer = { kind: base.stores.kind, where: base.stores.where, version, latest };
  if (opts.json) io.out(`${toJson(answer, 2)}\n`);
  else
    io.out(
      `${answer.kind} store at ${answer.where}: schema version ${version} (this the-loop's latest: ${latest})\n`,
    );
  return EXIT.ok;
}

function printCopy(io: Io, from: string, report: CopyReport, skipped: boolean): void {
  if (!report.copied) {
    io.err(`the-loop: nothing copied: ${report.rejected.length} row(s) PostgreSQL would reject:\n`);
    for (const r of report.rejected.slice(0, 50)) io.err(`  ${r.table} ${oneLine(r.key)}: ${r.reason}\n`);
    if (report.rejected.length > 50) io.err(`  … and ${report.rejected.length - 50} more\n`);
    io.err(
      'hint: fix those rows in the SQLite file, or copy the rest with --skip-rejected (they are left out).\n',
    );
    return;
  }
  io.out(`copied ${from} into the PostgreSQL store:\n`);
  io.out(
    table(
      ['table', 'rows'],
      report.tables.map((t) => [t.table, formatInt(t.rows)]),
    ),
  );
  io.out(`\n${formatInt(report.rows)} rows in all.\n`);
  if (skipped && report.rejected.length > 0) {
    io.out(`${report.rejected.length} row(s) left out (--skip-rejected):\n`);
    for (const r of report.rejected.slice(0, 50)) io.out(`  ${r.table} ${oneLine(r.key)}: ${r.reason}\n`);
  }
}

/** `store copy`: a SQLite registry into the configured (empty) PostgreSQL store. */
async function storeCopy(
  base: Base,
  io: Io,
  opts: { from?: string; skipRejected?: boolean; json?: boolean },
): Promise<number> {
  const { stores } = base;
  if (!stores.copyFromSqlite)
    throw new LoopError('usage', 'store copy copies into a PostgreSQL store, and this config uses SQLite', {
      hint: 'Set store: { kind: postgres, url: env:THE_LOOP_DATABASE_URL } in the config, then run it again.',
    });
  const from = opts.from ? resolve(io.cwd, opts.from) : registryPath(base.loaded.dataDir);
  if (!existsSync(from))
    throw new LoopError('usage', `no SQLite registry at ${from}`, {
      hint: 'Name it: --from <path to the-loop.db>.',
    });
  let last = 0;
  const report = await stores.copyFromSqlite(from, {
    skipRejected: opts.skipRejected,
    progress: (t, done, total) => {
      if (opts.json || Date.now() - last < 500) return;
      last = Date.now();
      io.err(`copying ${t}: ${formatInt(done)}/${formatInt(total)}\r`);
    },
  });
  if (opts.json) io.out(`${toJson({ from, to: stores.where, ...report }, 2)}\n`);
  else printCopy(io, from, report, Boolean(opts.skipRejected));
  return report.copied ? EXIT.ok : EXIT.failed;
}

export function addStoreCommands(program: Command, { io, withBase }: ProgramContext): void {
  const store = program
    .command('store')
    .description('the store: its schema, and a move from SQLite to PostgreSQL');
  store
    .command('migrate')
    .description("bring the configured store's schema to this version (every command does on opening it)")
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) =>
      withBase(cmd, (base) => storeMigrate(base, io, opts), { migrateStore: true }),
    );
  store
    .command('copy')
    .description(
      'copy a SQLite registry (every session, turn, delivery, ledger row, act) into the empty PostgreSQL store',
    )
    .option('--from <path>', "the SQLite registry (default: the data directory's the-loop.db)")
    .option('--skip-rejected', 'leave out the rows PostgreSQL would reject, and copy the rest')
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) => withBase(cmd, (base) => storeCopy(base, io, opts)));
}
