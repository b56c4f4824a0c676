import { type ConnectorConfig, operatorGrants } from '../config/connector-schema.js';
import type { Grant, TargetRule } from '../connector/grant.js';
import { toolsWithin } from '../connector/grant-rules.js';
import type { DriveAuditStore, DriveRecord, OperatorDrives } from '../core/ports/drives.js';
import { parseWhen } from '../ledger/report.js';
import { oneLine, table, toJson } from './format.js';
import { EXIT, type Io } from './io.js';

/**
 * `the-loop mcp grants` and `the-loop mcp audit`: what each operator agent may do through the
 * terminal connector (its declared ceiling) and what it did (the audit: every call, with a digest of
 * its payload, never the payload). They open the base only (config, database); every line is printed
 * through the scrubbing io, and stored rows were scrubbed when written.
 */

/** What the reports read: the connector's config and the audit. `Base` has both. */
export interface McpReportBase {
  loaded: { config: { connector: Pick<ConnectorConfig, 'operators'> } };
  drives: DriveAuditStore;
}

interface GrantRow extends Grant {
  /** Whether the config still declares it (the audit may hold operators removed since). */
  declared: boolean;
  calls: number;
  drives: number;
  lastAt: string | null;
  lastDriveAt: string | null;
}

/** `the-loop mcp grants`: every declared operator (and any the audit holds that no longer is). */
export async function mcpGrantsCommand(
  deps: { connector: Pick<ConnectorConfig, 'operators'>; drives: DriveAuditStore },
  io: Io,
  opts: { json?: boolean | undefined },
): Promise<number> {
  const counts = new Map((await deps.drives.byOperator()).map((c) => [c.operator, c]));
  const rows: GrantRow[] = operatorGrants(deps.connector).map((g) => ({
    ...g,
    declared: true,
    ...countsOf(counts.get(g.operator)),
  }));
  const gone = [...counts.values()].filter((c) => !rows.some((r) => r.operator === c.operator));
  if (opts.json) {
    const undeclared = gone.map((c) => ({ operator: c.operator, declared: false, ...countsOf(c) }));
    io.out(`${toJson([...rows, ...undeclared], 2)}\n`);
    return EXIT.ok;
  }
  if (rows.length === 0) {
    io.out(
      'No operator declared: `the-loop mcp` refuses to start. Declare one under connector.operators in the config (docs/connector.md).\n',
    );
  } else {
    io.out(`${rows.length} operator${rows.length === 1 ? '' : 's'} (connector.operators)\n\n`);
    io.out(
      table(
        ['OPERATOR', 'BACKENDS', 'SCOPE', 'TARGETS', 'TOOLS', 'RUN', 'CALLS', 'DRIVES', 'LAST DRIVE'],
        rows.map(grantCells),
      ),
    );
  }
  if (gone.length > 0) {
    io.out('\nIn the audit but no longer declared:\n');
    for (const c of gone)
      io.out(`  ${oneLine(c.operator, 60)}: ${c.calls} calls, ${c.drives} drives, last ${when(c.lastAt)}\n`);
  }
  return EXIT.ok;
}

const countsOf = (c: OperatorDrives | undefined) => ({
  calls: c?.calls ?? 0,
  drives: c?.drives ?? 0,
  lastAt: c?.lastAt ?? null,
  lastDriveAt: c?.lastDriveAt ?? null,
});

function grantCells(g: GrantRow): string[] {
  const all = toolsWithin(g.scope);
  const tools =
    g.tools.length === all.length && all.every((t) => g.tools.includes(t))
      ? `all within ${g.scope}`
      : g.tools.join(', ');
  return [
    g.operator,
    g.backends.join(', '),
    g.scope,
    describeTargets(g.targets),
    tools,
    `${g.run.timeoutSeconds} s, ${g.run.maxOutputLines} lines${g.run.inPane ? ', in pane' : ''}`,
    String(g.calls),
    String(g.drives),
    g.lastDriveAt === null ? 'never' : when(g.lastDriveAt),
  ];
}

/** A target rule in words (names quoted: they are the config's, but shown exactly). */
export function describeTargets(rule: TargetRule): string {
  switch (rule.kind) {
    case 'any':
      return 'any terminal';
    case 'single':
      return `only ${JSON.stringify(rule.name)} (bound at start)`;
    case 'session':
      return `the session of ${rule.workItem}`;
    case 'prefix':
      return `names starting ${rule.prefixes.map((p) => JSON.stringify(p)).join(' or ')}`;
    default:
      return 'unknown';
  }
}

const when = (at: string): string => at.slice(0, 19).replace('T', ' ');

export interface McpAuditOptions {
  since?: string | undefined;
  until?: string | undefined;
  operator?: string | undefined;
  limit?: number | undefined;
  json?: boolean | undefined;
}

/** `the-loop mcp audit`: the connector's calls, newest first. */
export async function mcpAuditCommand(
  deps: { drives: DriveAuditStore },
  io: Io,
  opts: McpAuditOptions,
  now: Date = new Date(),
): Promise<number> {
  const limit = opts.limit ?? 200;
  const rows = await deps.drives.list({
    since: opts.since === undefined ? undefined : parseWhen(opts.since, now, '--since').toISOString(),
    until: opts.until === undefined ? undefined : parseWhen(opts.until, now, '--until').toISOString(),
    operator: opts.operator,
    limit,
  });
  if (opts.json) {
    io.out(`${toJson(rows, 2)}\n`);
    return EXIT.ok;
  }
  const refused = rows.filter((r) => r.outcome === 'refused').length;
  io.out(
    `${rows.length} call${rows.length === 1 ? '' : 's'}${rows.length === limit ? ` (the newest ${limit}; --limit for more)` : ''} · ${refused} refused\n`,
  );
  if (rows.length === 0) return EXIT.ok;
  io.out('\n');
  io.out(table(['WHEN', 'OPERATOR', 'TOOL', 'TARGET', 'OUTCOME', 'PAYLOAD', 'DETAIL'], rows.map(auditCells)));
  return EXIT.ok;
}

function auditCells(r: DriveRecord): string[] {
  const target =
    r.targetId === null && r.targetName === null
      ? '-'
      : `${oneLine(r.targetName ?? '?', 40)} (${oneLine(r.targetId ?? '?', 20)})`;
  return [
    when(r.at),
    oneLine(r.operator, 40),
    oneLine(r.tool, 40),
    target,
    r.code ? `${r.outcome} ${oneLine(r.code, 30)}` : r.outcome,
    r.payloadSha256 ? `${r.payloadSha256.slice(0, 12)} ${r.payloadBytes} B` : '-',
    oneLine(r.detail ?? '', 80),
  ];
}
