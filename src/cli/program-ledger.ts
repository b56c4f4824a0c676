import type { Command } from 'commander';
import { LoopError } from '../core/errors.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import type { Base } from '../main-base.js';
import { parseStatus } from './events.js';
import { addPruneCommand, pruneEvents } from './events-prune.js';
import { intOption } from './options.js';
import { type ProgramContext, recoverForReaders } from './program-context.js';

/** The inbox and the registry's turns, for the commands that only read them (no app): lost turns marked first. */
const eventsView = async (base: Base) => {
  const { openInbox } = await import('../main-base.js');
  await recoverForReaders(base);
  return { inbox: openInbox(base), store: base.sessions, githubStatus: base.stores.githubStatus };
};

export function addEventsCommands(program: Command, { io, withApp, withBase }: ProgramContext): void {
  const events = program
    .command('events')
    .description('the inbox: every webhook delivery, its route and outcome');
  events
    .command('list')
    .description('deliveries, newest first')
    .option(
      '-s, --status <status>',
      'only this status (queued, running, done, failed, rejected, ignored)',
      (v) => {
        try {
          return parseStatus(v);
        } catch (error) {
          throw new LoopError('usage', (error as Error).message);
        }
      },
    )
    .option('-w, --work-item <ref>', 'only this work item')
    .option('-n, --limit <n>', 'at most this many (default 50)', intOption('--limit', 1, 100_000))
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) =>
      withBase(cmd, async (base) =>
        (await import('./events.js')).listEvents(await eventsView(base), io, {
          ...opts,
          workItem: opts.workItem ? formatWorkItem(parseWorkItem(opts.workItem)) : undefined,
        }),
      ),
    );
  events
    .command('show')
    .description('one delivery: route, reason, error, its turns')
    .argument('<delivery-id>')
    .option('--body', 'also print the payload')
    .option('--json', 'JSON output')
    .action(async (id: string, opts, cmd: Command) =>
      withBase(cmd, async (base) =>
        (await import('./events.js')).showEvent(await eventsView(base), io, id, opts),
      ),
    );
  events
    .command('retry')
    .description('queue a failed delivery again')
    .argument('<delivery-id>')
    .option('--json', 'JSON output')
    .action(async (id: string, opts, cmd: Command) =>
      withApp(cmd, async (app) => (await import('./events.js')).retryEvent(app, io, id, opts)),
    );
  addPruneCommand(events, intOption('--retain-days', 1, 3650), (opts, cmd) =>
    withApp(cmd, (app) => pruneEvents(app, io, opts)),
  );
}

/** `usage`, `usage scan` and `acts`: they open the base only (config, log, database, ledger). */
export function addLedgerCommands(program: Command, { io, withBase }: ProgramContext): void {
  program
    .command('usage')
    .description('tokens and estimated cost from the usage ledger, with what the totals leave out')
    .option('--since <when>', 'from this long ago or this date: 7d, 24h, 2w, 2026-11-30 (default 7d)')
    .option('--until <when>', 'up to this long ago or this date (default now)')
    .option('--by <key>', 'group by day, engine, model, work-item, payer or session (default day)')
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) =>
      withBase(cmd, async (app) => (await import('./usage.js')).usageCommand(app, io, opts)),
    )
    .command('scan')
    .description(
      "import Claude Code's transcript history into the ledger (incremental: only new bytes are read)",
    )
    .argument('[dirs...]', "transcript directories (default: the Claude config dir's projects/)")
    .option('--workers <n>', 'threads to scan with (default: one per core)', intOption('--workers', 1, 64))
    .option('--report', "then print the report (`usage`'s --since, --until and --by apply)")
    .option('--since <when>', 'with --report: from this long ago or this date (default 7d)')
    .option('--until <when>', 'with --report: up to this long ago or this date (default now)')
    .option('--by <key>', 'with --report: group by day, engine, model, work-item, payer or session')
    .option('--json', 'JSON output')
    .action(async (dirs: string[], opts, cmd: Command) => {
      // Options given before `scan` are taken by `usage` itself (same names): either counts.
      const parent = (cmd.parent?.opts() ?? {}) as Record<string, string | boolean | undefined>;
      const pick = (key: 'since' | 'until' | 'by') => (opts[key] ?? parent[key]) as string | undefined;
      await withBase(cmd, async (app) =>
        (await import('./usage.js')).usageScanCommand(app, io, dirs, {
          workers: opts.workers,
          json: opts.json ?? (parent.json as boolean | undefined),
          report: opts.report ? { since: pick('since'), until: pick('until'), by: pick('by') } : undefined,
        }),
      );
    });
  program
    .command('acts')
    .description(
      "consequential acts of turns (pushes, merges, publishes…), with their outcome and the policy's verdict",
    )
    .option('-w, --work-item <ref>', 'only this work item')
    .option('--session <id>', 'only this session')
    .option('--kind <kind>', 'only this kind of act (git-push, pr-merge, package-publish, …)')
    .option('--since <when>', 'from this long ago or this date: 7d, 24h, 2026-11-30')
    .option('--breaches', 'only breaches')
    .option('-n, --limit <n>', 'at most this many (default 200)', intOption('--limit', 1, 100_000))
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) =>
      withBase(cmd, async (app) => (await import('./acts.js')).actsCommand(app, io, opts)),
    );
}
