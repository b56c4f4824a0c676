import type { ActFilter, ActRecord } from '../acts/audit.js';
import { ACT_KINDS, type ActKind } from '../acts/types.js';
import { LoopError } from '../core/errors.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { parseWhen } from '../ledger/report.js';
import type { Base } from '../main-base.js';
import { oneLine, table, toJson } from './format.js';
import { EXIT, type Io } from './io.js';

export interface ActsOptions {
  workItem?: string;
  session?: string;
  kind?: string;
  since?: string;
  breaches?: boolean;
  limit?: number;
  json?: boolean;
}

/** `the-loop acts`: the consequential acts turns performed or tried, newest first, with breaches. */
export async function actsCommand(app: Pick<Base, 'acts'>, io: Io, options: ActsOptions): Promise<number> {
  if (options.kind !== undefined && !(ACT_KINDS as readonly string[]).includes(options.kind)) {
    throw new LoopError(
      'usage',
      `--kind takes one of ${ACT_KINDS.join(', ')}, not ${JSON.stringify(options.kind)}`,
    );
  }
  const filter: ActFilter = {
    workItem: options.workItem ? formatWorkItem(parseWorkItem(options.workItem)) : undefined,
    sessionId: options.session,
    kind: options.kind as ActKind | undefined,
    since: options.since ? parseWhen(options.since, new Date(), '--since') : undefined,
    breachesOnly: options.breaches,
    limit: options.limit ?? 200,
  };
  const acts = await app.acts.list(filter);
  if (options.json) {
    io.out(`${toJson(acts, 2)}\n`);
    return EXIT.ok;
  }
  const breaches = acts.filter((a) => a.breach).length;
  const blocked = acts.filter((a) => a.outcome === 'blocked').length;
  io.out(
    `${acts.length} act${acts.length === 1 ? '' : 's'}${acts.length === filter.limit ? ` (the newest ${filter.limit}; --limit for more)` : ''} · ${breaches} breach${breaches === 1 ? '' : 'es'} · ${blocked} blocked before they took effect\n`,
  );
  if (acts.length === 0) return EXIT.ok;
  io.out('\n');
  io.out(table(['WHEN', 'WORK ITEM', 'TURN', 'ACT', 'OUTCOME', 'POLICY', 'SEEN', 'WHAT'], acts.map(row)));
  if (breaches > 0) {
    io.out(
      '\nA breach holds its session: nothing more is delivered to it until `the-loop sessions resume <work-item>`.\n',
    );
  }
  return EXIT.ok;
}

function row(a: ActRecord): string[] {
  return [
    a.at.slice(0, 16).replace('T', ' '),
    oneLine(a.workItem, 40),
    a.turnSeq === null ? '?' : String(a.turnSeq),
    `${a.kind}${a.evasion ? ` (via ${a.evasion})` : ''}`,
    a.outcome,
    a.breach ? `BREACH (${a.rule ?? 'deny'})` : a.verdict === 'deny' ? `denied (${a.rule ?? ''})` : 'allowed',
    // wire: the gateway saw it (certain); command: read from the turn's commands (best effort).
    a.source === 'wire' ? 'gateway' : 'command',
    oneLine(a.command, 80),
  ];
}
