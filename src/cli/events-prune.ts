import type { Command } from 'commander';
import type { Inbox } from '../core/ports/inbox.js';
import { KEEP_FOREVER } from '../inbox/retention.js';
import type { App } from '../main.js';
import { formatInt } from './format.js';
import { EXIT, type Io } from './io.js';

const MIB = 1024 * 1024;

export const formatSize = (bytes: number): string =>
  bytes < MIB ? `${formatInt(Math.ceil(bytes / 1024))} KiB` : `${(bytes / MIB).toFixed(1)} MiB`;

/** Prune in batches (one transaction each) until nothing is left: the totals of all of them. */
export async function pruneAll(
  inbox: Pick<Inbox, 'prune'>,
  options: { retainDays: number; dryRun: boolean },
): Promise<{ cutoff: string | null; pruned: number; bytes: number }> {
  const total = { cutoff: null as string | null, pruned: 0, bytes: 0 };
  for (;;) {
    const report = await inbox.prune(options);
    total.cutoff = report.cutoff;
    total.pruned += report.pruned;
    total.bytes += report.bytes;
    if (!report.more || report.pruned === 0) return total;
  }
}

export interface PruneFlags {
  retainDays?: number;
  dryRun?: boolean;
  json?: boolean;
}

/** `events prune` on the `events` command group (its parser for --retain-days comes from the CLI). */
export function addPruneCommand(
  events: Command,
  parseDays: (value: string) => number,
  action: (opts: PruneFlags, cmd: Command) => Promise<void>,
): void {
  events
    .command('prune')
    .description('drop the bodies of finished deliveries older than inbox.retainDays, keeping their rows')
    .option('--retain-days <n>', 'this many days instead of inbox.retainDays (1 to 3650)', parseDays)
    .option('--dry-run', 'count what would go, change nothing')
    .option('--json', 'JSON output')
    .action(action);
}

/**
 * `the-loop events prune`: retention on demand (the daemon also prunes at start and hourly). Drops
 * the bodies of finished deliveries older than `inbox.retainDays` (or `--retain-days`), keeps rows.
 */
export async function pruneEvents(app: App, io: Io, options: PruneFlags): Promise<number> {
  const retainDays = options.retainDays ?? app.loaded.config.inbox.retainDays;
  const dryRun = options.dryRun ?? false;
  const total = await pruneAll(app.inbox, { retainDays, dryRun });
  if (options.json) {
    io.out(`${JSON.stringify({ retainDays, dryRun, ...total })}\n`);
    return EXIT.ok;
  }
  if (retainDays === KEEP_FOREVER) {
    io.out('inbox.retainDays is 0: delivery bodies are kept forever; nothing pruned.\n');
    return EXIT.ok;
  }
  const what = `the bodies of ${formatInt(total.pruned)} finished deliver${total.pruned === 1 ? 'y' : 'ies'} (${formatSize(total.bytes)}) received and last changed before ${total.cutoff} (${retainDays} days)`;
  if (dryRun) {
    io.out(`Would drop ${what}. Nothing changed (--dry-run).\n`);
    return EXIT.ok;
  }
  io.out(
    total.pruned === 0
      ? `Nothing to prune: no finished delivery older than ${retainDays} days still has its body.\n`
      : `Dropped ${what}. Their rows are kept (\`the-loop events show <id>\`); the database file keeps its size and SQLite reuses the freed pages.\n`,
  );
  return EXIT.ok;
}
