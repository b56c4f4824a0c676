import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { LoopError } from '../core/errors.js';
import type { PriceTable } from '../ledger/pricing.js';
import { GROUP_BY, type GroupBy, parseWhen, type ReportGroup, type UsageReport } from '../ledger/report.js';
import { totalTokens } from '../ledger/usage.js';
import type { Base } from '../main-base.js';
import { formatInt, formatUsd, oneLine, table, toJson } from './format.js';
import { EXIT, type Io } from './io.js';
import { ScanProgress } from './scan-progress.js';

export interface UsageOptions {
  since?: string;
  until?: string;
  by?: string;
  json?: boolean;
}

/** A cost for a group: what the priced rows add up to, and what is unknown — never `$0` for unknown. */
export function formatGroupCost(g: Pick<ReportGroup, 'costUsd' | 'unpricedRows' | 'rows'>): string {
  if (g.rows === 0) return '-';
  if (g.costUsd === null) return 'unknown';
  const dollars = formatUsd(g.costUsd);
  return g.unpricedRows > 0 ? `${dollars} + unknown` : dollars;
}

const day = (iso: string) => iso.slice(0, 16).replace('T', ' ');

/** `the-loop usage scan [dirs…]`: import transcript history; prints what was read and added. */
export async function usageScanCommand(
  app: Base,
  io: Io,
  dirsGiven: string[],
  options: { workers?: number; json?: boolean; report?: UsageOptions | undefined },
): Promise<number> {
  // A bad --since is refused before anything is read.
  const query = options.report ? reportQuery(options.report) : undefined;
  // Loaded here, not with the report: `the-loop usage` never loads the scanner and its threads.
  const { defaultTranscriptDirs, scanTranscripts } = await import('../ledger/scan.js');
  const dirs =
    dirsGiven.length > 0 ? dirsGiven.map((d) => resolve(io.cwd, d)) : defaultTranscriptDirs(io.env);
  if (dirs.length === 0) {
    throw new LoopError('usage', 'no Claude Code transcript directory found', {
      hint: 'Name one: the-loop usage scan ~/.claude/projects (or set CLAUDE_CONFIG_DIR).',
    });
  }
  for (const d of dirs) {
    if (!existsSync(d)) throw new LoopError('usage', `not a directory: ${d}`);
  }
  const progress = new ScanProgress(io, { json: options.json });
  const summary = await scanTranscripts(
    { ledger: app.ledger, cursors: app.scanCursors, sessions: app.sessions },
    dirs,
    { workers: options.workers, onProgress: (done, total) => progress.update(done, total) },
  ).finally(() => progress.end());
  for (const warning of summary.warnings.slice(0, 20)) app.logger.warn('usage scan', { warning });
  // Rows of earlier scans whose model had no price then get one now if the price data knows it.
  const repriced = await app.ledger.repriceUnknown();
  const report = query ? await app.ledger.store.report(query) : undefined;
  if (options.json) {
    const prices = app.ledger.priceSources;
    const scan = { ...summary, repriced };
    io.out(`${toJson(report ? { scan, report: { ...report, prices } } : scan, 2)}\n`);
    return EXIT.ok;
  }
  io.out(
    `Scanned ${formatInt(summary.files)} files in ${dirs.join(', ')} (${formatInt(summary.filesRead)} read, ${(summary.bytesRead / 1e6).toFixed(1)} MB, ${summary.workers > 1 ? `${summary.workers} threads` : 'one thread'}) in ${(summary.ms / 1000).toFixed(2)} s: ${formatInt(summary.records)} requests found, ${formatInt(summary.added)} added${summary.copies ? `, ${formatInt(summary.copies)} copies of requests found earlier in this scan` : ''}, ${formatInt(summary.duplicates)} already in the ledger${summary.alreadyMetered ? `, ${formatInt(summary.alreadyMetered)} of sessions metered per turn` : ''}.\n`,
  );
  if (repriced > 0)
    io.out(`  ${formatInt(repriced)} earlier row(s) whose model had no price are priced now.\n`);
  if (summary.restarted)
    io.out(
      `  ${summary.restarted} file(s) shrank or were replaced: read again from the start (nothing counted twice).\n`,
    );
  if (summary.skippedLines) {
    io.out(
      `  ${formatInt(summary.skippedLines)} unusable line(s) skipped, e.g. ${oneLine(summary.warnings[0] ?? '', 200)}\n`,
    );
  }
  for (const u of summary.unreadable.slice(0, 10)) io.out(`  unreadable: ${oneLine(u, 200)}\n`);
  if (report && query) {
    io.out('\n');
    printReport(io, report, query.by, app.ledger.priceSources);
  } else io.out('See the totals with `the-loop usage --since 30d` (or scan with --report).\n');
  return EXIT.ok;
}

/** The report's period and grouping from the options, checked. */
function reportQuery(options: UsageOptions): { since: Date; until: Date; by: GroupBy } {
  const now = new Date();
  const since = options.since ? parseWhen(options.since, now, '--since') : parseWhen('7d', now, '--since');
  const until = options.until ? parseWhen(options.until, now, '--until') : new Date(now.getTime() + 1000);
  if (since >= until) throw new LoopError('usage', '--since must be before --until');
  const by = (options.by ?? 'day') as GroupBy;
  if (!GROUP_BY.includes(by)) {
    throw new LoopError(
      'usage',
      `--by takes one of ${GROUP_BY.join(', ')}, not ${JSON.stringify(options.by)}`,
    );
  }
  return { since, until, by };
}

/** `the-loop usage`: totals of the usage ledger, grouped, with what they leave out. */
export async function usageCommand(
  app: Pick<Base, 'ledger'>,
  io: Io,
  options: UsageOptions,
): Promise<number> {
  const query = reportQuery(options);
  const report = await app.ledger.store.report(query);
  const prices = app.ledger.priceSources;
  if (options.json) {
    io.out(`${toJson({ ...report, prices }, 2)}\n`);
    return EXIT.ok;
  }
  printReport(io, report, query.by, prices);
  return EXIT.ok;
}

function printReport(io: Io, report: UsageReport, by: GroupBy, prices: PriceTable['sources']): void {
  const { total, notIncluded } = report;
  const missing: string[] = [];
  if (notIncluded.unmeteredCount > 0)
    missing.push(`${notIncluded.unmeteredCount} unmetered run${notIncluded.unmeteredCount === 1 ? '' : 's'}`);
  if (notIncluded.unpricedRows > 0)
    missing.push(
      `cost of ${notIncluded.unpricedRows} unpriced row${notIncluded.unpricedRows === 1 ? '' : 's'}`,
    );
  io.out(
    `Usage ${day(report.since)} → ${day(report.until)} UTC: ${formatInt(totalTokens(total.usage))} tokens in ${formatInt(total.turns)} turn${total.turns === 1 ? '' : 's'} (${formatInt(total.rows)} ledger row${total.rows === 1 ? '' : 's'}) · estimated cost ${formatGroupCost(total)}${missing.length ? ` · not included: ${missing.join(', ')}` : ''}\n\n`,
  );
  if (report.groups.length > 0) {
    io.out(
      table(
        [
          by.toUpperCase(),
          'TURNS',
          'ROWS',
          'INPUT',
          'OUTPUT',
          'CACHE READ',
          'CACHE WRITE',
          'REASONING',
          'EST. COST',
          'BASIS',
        ],
        report.groups.map((g) => [
          oneLine(g.key, 60),
          formatInt(g.turns),
          formatInt(g.rows),
          formatInt(g.usage.inputTokens),
          formatInt(g.usage.outputTokens),
          formatInt(g.usage.cacheReadTokens),
          formatInt(g.usage.cacheCreationTokens),
          formatInt(g.usage.reasoningTokens),
          formatGroupCost(g),
          g.costBases.join('+') || '-',
        ]),
      ),
    );
  } else {
    io.out('No metered usage in this period.\n');
  }
  io.out('\nNot included (cost unknown, not in the totals above):\n');
  if (notIncluded.unmetered.length === 0 && notIncluded.unpricedRows === 0) io.out('  nothing\n');
  for (const u of notIncluded.unmetered) {
    io.out(
      `  ${formatInt(u.count)} unmetered run${u.count === 1 ? '' : 's'} · ${u.engine ?? '?'} on ${u.runner ?? '?'} · last ${day(u.last)} · ${oneLine(u.reason, 120)}\n`,
    );
  }
  if (notIncluded.unpricedRows > 0) {
    io.out(
      `  cost of ${formatInt(notIncluded.unpricedRows)} row${notIncluded.unpricedRows === 1 ? '' : 's'} of models without a list price (${notIncluded.unpricedModels.map((m) => oneLine(m, 60)).join(', ')}): their tokens are counted above; add prices under pricing: in the config\n`,
    );
  }
  const { dataset, configured } = prices;
  const own =
    configured.length > 0
      ? `; pricing: in the config for ${configured.map((m) => oneLine(m, 60)).join(', ')}`
      : '';
  io.out(
    `\nCosts are estimates, not charges: engine-reported (the engine computed them) or list-price (${dataset.name} ${dataset.version}, data of ${dataset.date}, at each request's time${own}).\n`,
  );
}
