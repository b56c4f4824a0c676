import { type Command, Option } from 'commander';
import type { GrantRequest, TargetRule } from '../connector/grant.js';
import { isLoopbackHost } from '../connector/http/http-rules.js';
import {
  BACKENDS,
  type BackendName,
  SCOPES,
  type Scope,
  TOOL_NAMES,
  type ToolName,
} from '../connector/names.js';
import { LoopError } from '../core/errors.js';
import { toJson } from '../core/text.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import type { Base } from '../main-base.js';
import { EXIT, type Io } from './io.js';
import type { McpAuditOptions } from './mcp-reports.js';
import { intOption } from './options.js';

/**
 * `the-loop mcp`: the terminal connector as an MCP server on stdio (or, with `--http`, Streamable
 * HTTP on loopback), for one operator agent; what it may do is the operator's grant from the
 * config, narrowed by these options (asking for more than the grant refuses to start). `mcp grants`
 * and `mcp audit` report (cli/mcp-reports.ts).
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
  http?: boolean;
  host?: string;
  port?: number;
  json?: boolean;
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
  if (opts.http) return mcpHttpCommand(base, io, opts, version);
  if (opts.host !== undefined || opts.port !== undefined || opts.json)
    throw new LoopError(
      'usage',
      '--host, --port and --json go with --http (stdio prints nothing of its own)',
    );
  const { serveMcpStdio } = await import('../main-mcp.js');
  // A client ending the server with SIGTERM (as MCP clients do after closing stdin) still gets the
  // backends disposed: no waiter child is left on the tmux server.
  const signalled = untilSignal();
  try {
    await serveMcpStdio(base, {
      operator: opts.operator,
      request: grantRequest(opts),
      env: io.env,
      version,
      stdin: process.stdin,
      stdout: process.stdout,
      stop: signalled.promise,
    });
  } finally {
    signalled.dispose();
  }
  return EXIT.ok;
}

/**
 * `the-loop mcp --http`: serve until SIGINT or SIGTERM. One line on stdout says where, and which file
 * holds the bearer token — never the token itself.
 */
async function mcpHttpCommand(base: Base, io: Io, opts: McpCommandOptions, version: string): Promise<number> {
  const host = opts.host ?? '127.0.0.1';
  if (!isLoopbackHost(host))
    throw new LoopError(
      'usage',
      `--host must be a loopback address (127.0.0.1, ::1, localhost), not ${host}`,
      {
        hint: 'the connector drives terminals on this machine: it is served to this machine only',
      },
    );
  const { serveMcpHttp } = await import('../main-mcp-http.js');
  // Listened for before serving: a signal during start-up still stops it cleanly.
  const signalled = untilSignal();
  try {
    const served = await serveMcpHttp(base, {
      operator: opts.operator,
      request: grantRequest(opts),
      env: io.env,
      version,
      host,
      port: opts.port ?? 0,
    });
    const { url, tokenFile, operator } = served;
    io.out(
      opts.json
        ? `${toJson({ url, tokenFile, operator })}\n`
        : `the-loop mcp: operator ${operator} at ${url} (bearer token in ${tokenFile})\n`,
    );
    await Promise.race([signalled.promise, served.done]);
    await served.close();
  } finally {
    signalled.dispose();
  }
  return EXIT.ok;
}

/** Resolves on the first SIGINT or SIGTERM; `dispose` stops listening for them. */
function untilSignal(): { promise: Promise<void>; dispose(): void } {
  let stop = () => {};
  const promise = new Promise<void>((resolve) => {
    stop = () => resolve();
  });
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return {
    promise,
    dispose: () => {
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
    },
  };
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
    )
    .option(
      '--http',
      'serve over Streamable HTTP on a loopback address, with a bearer token (docs/connector.md)',
    )
    .option('--host <address>', 'with --http: the loopback address to listen on (default 127.0.0.1)')
    .option(
      '--port <port>',
      'with --http: the port (default 0: any free port)',
      intOption('--port', 0, 65535),
    )
    .option('--json', 'with --http: print {url, tokenFile, operator} as JSON');
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
    .action(async (_opts: unknown, cmd: Command) =>
      withBase(cmd, async (base) =>
        (await import('./mcp-reports.js')).mcpGrantsCommand(
          { connector: base.loaded.config.connector, drives: base.drives },
          io,
          { json: reportOptions<{ json?: boolean }>(cmd).json },
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
    .action(async (_opts: unknown, cmd: Command) => {
      const { since, until, operator, limit, json } = reportOptions<McpAuditOptions>(cmd);
      return withBase(cmd, async (base) =>
        (await import('./mcp-reports.js')).mcpAuditCommand({ drives: base.drives }, io, {
          since,
          until,
          operator,
          limit,
          json,
        }),
      );
    });
}

/**
 * A report's options with those `mcp` itself parsed: the root program recognises options after a
 * subcommand, so in `mcp audit --operator x --json` the server's `--operator` and `--json` take
 * them before `audit` sees them.
 */
const reportOptions = <T>(cmd: Command): T => cmd.optsWithGlobals() as T;
