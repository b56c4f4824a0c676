import { type Command, Option } from 'commander';
import type { GrantRequest, TargetRule } from '../connector/grant.js';
import {
  BACKENDS,
  type BackendName,
  SCOPES,
  type Scope,
  TOOL_NAMES,
  type ToolName,
} from '../connector/names.js';
import { LoopError } from '../core/errors.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import type { Base } from '../main-base.js';
import { EXIT, type Io } from './io.js';
import type { McpAuditOptions } from './mcp-reports.js';
import { intOption } from './options.js';

/**
 * `the-loop mcp`: the terminal connector as an MCP server on stdio, for one operator agent; what it
 * may do is the operator's grant from the config, narrowed by these options (asking for more than
 * the grant refuses to start). `mcp grants` and `mcp audit` report (cli/mcp-reports.ts).
 */

export interface McpCommandOptions {
  operator?: string;
  backend?: string;
  scope?: Scope;
  target?: string;
  workItem?: string;
  prefix?: string[];
  tools?: string;
  timeout?: number;
  maxLines?: number;
}

function listOf<T extends string>(what: string, value: string, allowed: readonly T[]): T[] {
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = items.filter((i) => !(allowed as readonly string[]).includes(i));
  if (items.length === 0 || bad.length > 0)
    throw new LoopError(
      'usage',
      `${what} takes a comma list of ${allowed.join(', ')}${bad.length ? `, not ${JSON.stringify(bad[0])}` : ''}`,
    );
  return items as T[];
}

/** The options as a grant request: each one given narrows the operator's ceiling. */
export function grantRequest(opts: McpCommandOptions): GrantRequest {
  const targetsGiven = [opts.target, opts.workItem, opts.prefix].filter((v) => v !== undefined);
  if (targetsGiven.length > 1)
    throw new LoopError('usage', 'give at most one of --target, --work-item and --prefix');
  let targets: TargetRule | undefined;
  if (opts.target !== undefined) targets = { kind: 'single', name: opts.target };
  if (opts.workItem !== undefined)
    targets = { kind: 'session', workItem: formatWorkItem(parseWorkItem(opts.workItem)) };
  if (opts.prefix !== undefined) {
    if (opts.prefix.some((p) => p === ''))
      throw new LoopError('usage', '--prefix takes a non-empty name prefix');
    targets = { kind: 'prefix', prefixes: opts.prefix };
  }
  const run: GrantRequest['run'] = {};
  if (opts.timeout !== undefined) run.timeoutSeconds = opts.timeout;
  if (opts.maxLines !== undefined) run.maxOutputLines = opts.maxLines;
  return {
    backends:
      opts.backend === undefined ? undefined : listOf<BackendName>('--backend', opts.backend, BACKENDS),
    scope: opts.scope,
    targets,
    tools: opts.tools === undefined ? undefined : listOf<ToolName>('--tools', opts.tools, TOOL_NAMES),
    run: Object.keys(run).length > 0 ? run : undefined,
  };
}

export async function mcpServeCommand(
  base: Base,
  io: Io,
  opts: McpCommandOptions,
  version: string,
): Promise<number> {
  const { serveMcpStdio } = await import('../main-mcp.js');
  await serveMcpStdio(base, {
    operator: opts.operator,
    request: grantRequest(opts),
    env: io.env,
    version,
    stdin: process.stdin,
    stdout: process.stdout,
  });
  return EXIT.ok;
}

/** The options of `the-loop mcp` (the server). */
export function addMcpServeOptions(mcp: Command): Command {
  return mcp
    .option(
      '--operator <name>',
      'the operator whose grant this connection uses (default: the only one declared)',
    )
    .option('--backend <list>', `only these backends (${BACKENDS.join(', ')}), comma-separated`)
    .addOption(new Option('--scope <scope>', 'at most this scope').choices(SCOPES))
    .option('--target <name>', 'only this terminal (bound to its identity at start)')
    .option('--work-item <ref>', "only this work item's agent session (github:<owner>/<repo>#<n>)")
    .option('--prefix <prefix...>', 'only terminals whose name starts with one of these')
    .option('--tools <list>', `only these tools (${TOOL_NAMES.join(', ')}), comma-separated`)
    .option('--timeout <seconds>', 'at most this long for run_command', intOption('--timeout', 1, 3600))
    .option(
      '--max-lines <n>',
      'at most this many output lines from run_command',
      intOption('--max-lines', 1, 10_000),
    );
}

/** Registers `grants` and `audit` under the `mcp` command; their code loads when one runs. */
export function addMcpReportCommands(
  mcp: Command,
  {
    io,
    withBase,
  }: { io: Io; withBase: (cmd: Command, fn: (base: Base) => Promise<number>) => Promise<void> },
): void {
  mcp
    .command('grants')
    .description('each operator: backends, scope, targets, tools and run limits, with its calls and drives')
    .option('--json', 'JSON output')
    .action(async (opts: { json?: boolean }, cmd: Command) =>
      withBase(cmd, async (base) =>
        (await import('./mcp-reports.js')).mcpGrantsCommand(
          { connector: base.loaded.config.connector, drives: base.drives },
          io,
          opts,
        ),
      ),
    );
  mcp
    .command('audit')
    .description(
      "the connector's calls, newest first: who, which tool, which terminal, outcome, payload digest",
    )
    .option('--since <when>', 'from this long ago or this date: 7d, 24h, 2026-11-30')
    .option('--until <when>', 'up to this long ago or this date (default now)')
    .option('--operator <name>', 'only this operator')
    .option('-n, --limit <n>', 'at most this many (default 200)', intOption('--limit', 1, 100_000))
    .option('--json', 'JSON output')
    .action(async (opts: McpAuditOptions, cmd: Command) =>
      withBase(cmd, async (base) =>
        (await import('./mcp-reports.js')).mcpAuditCommand({ drives: base.drives }, io, opts),
      ),
    );
}
