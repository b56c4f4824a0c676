import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { LoopError } from '../core/errors.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import type { Base } from '../main-base.js';
import { parseStatus } from './events.js';
import { addPruneCommand, pruneEvents } from './events-prune.js';
import { EXIT, type Io, processIo, scrubbingIo, showingIo } from './io.js';
import { addMcpReportCommands, addMcpServeOptions, type McpCommandOptions } from './mcp.js';
import { intOption } from './options.js';
import { addSessionsCommands, type WithApp } from './program-sessions.js';

const USAGE_CODES = new Set([
  'engine-unsupported',
  'usage',
  'cwd-missing',
  'config-invalid',
  'config-missing',
  'config-exists',
  'env-missing',
  'work-item-invalid',
  'engine-unknown',
]);

interface GlobalOptions {
  config?: string;
  dataDir?: string;
}

function readVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** What each group of commands is given: the IO, the exit code's setter, and how to open the app. */
interface ProgramContext {
  io: Io;
  setExit: (code: number) => void;
  globals: (cmd: Command) => GlobalOptions;
  withApp: WithApp;
  withBase: (cmd: Command, fn: (base: Base) => Promise<number> | number) => Promise<void>;
}

export function buildProgram(io: Io, setExit: (code: number) => void): Command {
  const program = new Command('the-loop')
    .description(
      'Turns GitHub events into turns of coding agents: one observable, accounted session per work item.',
    )
    .version(readVersion(), '-V, --version')
    .option('-c, --config <path>', 'config file (default: $THE_LOOP_CONFIG or .the-loop/config.yaml)')
    .option(
      '--data-dir <dir>',
      'state directory (default: $THE_LOOP_DATA_DIR, config dataDir, else beside the config — or, in a git work tree, $XDG_STATE_HOME/the-loop/<repo>-<digest>)',
    )
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .exitOverride();
  const context = programContext(io, setExit);
  addRunCommand(program, context);
  addSessionsCommands(program, io, context.withApp, context.withBase);
  addEventsCommands(program, context);
  addLedgerCommands(program, context);
  addDoctorCommand(program, context);
  addConfigCommands(program, context);
  addServeCommand(program, context);
  addConsoleCommand(program, context);
  addMcpCommands(program, context);
  return program;
}

/**
 * Command modules and the app are imported when a command runs, not when the CLI starts: each
 * command loads what it uses (the ledger commands never load the runners or the server).
 */
function programContext(io: Io, setExit: (code: number) => void): ProgramContext {
  const globals = (cmd: Command) => cmd.optsWithGlobals() as GlobalOptions;
  const withApp: WithApp = async (cmd, fn) => {
    const g = globals(cmd);
    const { createApp } = await import('../main.js');
    const app = await createApp({ cwd: io.cwd, env: io.env, configPath: g.config, dataDir: g.dataDir });
    io.useScrubber?.(app.scrubber.scrub);
    for (const warning of app.loaded.warnings) io.err(`the-loop: warning: ${warning}\n`);
    try {
      setExit(await fn(app));
    } finally {
      app.dispose();
    }
  };
  const withBase: ProgramContext['withBase'] = async (cmd, fn) => {
    const g = globals(cmd);
    const { openBase } = await import('../main-base.js');
    const base = openBase({ cwd: io.cwd, env: io.env, configPath: g.config, dataDir: g.dataDir });
    io.useScrubber?.(base.scrubber.scrub);
    for (const warning of base.loaded.warnings) io.err(`the-loop: warning: ${warning}\n`);
    try {
      setExit(await fn(base));
    } finally {
      base.dispose();
    }
  };
  return { io, setExit, globals, withApp, withBase };
}

function addRunCommand(program: Command, { io, withApp }: ProgramContext): void {
  program
    .command('run')
    .description("run one turn of a work item's session by hand (creating the session on first use)")
    .argument('<work-item>', 'github:<owner>/<repo>#<number>')
    .argument('[prompt...]', 'the turn text (or use --prompt-file)')
    .option('-e, --engine <name>', 'engine for a new session (default: defaults.engine)')
    .option(
      '--cwd <dir>',
      'working directory for a new session (default: defaults.cwd or the current directory)',
    )
    .addOption(new Option('--runner <runner>', 'runner for a new session').choices(['process', 'tmux']))
    .option('--prompt-file <path>', 'read the turn text from a file (- for stdin)')
    .option('--json', 'emit JSON lines: the session, every event, then the turn')
    .action(async (workItem: string, words: string[], opts, cmd: Command) => {
      let prompt = words.join(' ');
      if (opts.promptFile) {
        if (prompt)
          throw new LoopError('usage', 'give the prompt either as arguments or with --prompt-file, not both');
        prompt = readFileSync(opts.promptFile === '-' ? 0 : opts.promptFile, 'utf8');
      }
      if (!prompt.trim())
        throw new LoopError('usage', 'no prompt given', {
          hint: 'the-loop run github:owner/repo#1 "fix the failing test"',
        });
      await withApp(cmd, async (app) =>
        (await import('./run.js')).runCommand(app, io, workItem, prompt, opts),
      );
    });
}

function addEventsCommands(program: Command, { io, withApp }: ProgramContext): void {
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
      withApp(cmd, async (app) =>
        (await import('./events.js')).listEvents(app, io, {
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
      withApp(cmd, async (app) => (await import('./events.js')).showEvent(app, io, id, opts)),
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
function addLedgerCommands(program: Command, { io, withBase }: ProgramContext): void {
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

function addDoctorCommand(program: Command, { io, setExit, globals }: ProgramContext): void {
  program
    .command('doctor')
    .description('which engine binaries are installed, their versions, and how to install the missing ones')
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) => {
      const g = globals(cmd);
      const { loadConfig } = await import('../config/load.js');
      const loaded = loadConfig({ cwd: io.cwd, env: io.env, configPath: g.config, dataDir: g.dataDir });
      setExit(
        await (await import('./doctor.js')).doctorCommand(
          loaded.engines,
          loaded.config.defaults.engine,
          io,
          opts,
          loaded.config,
          loaded,
        ),
      );
    });
}

function addConfigCommands(program: Command, { io, setExit, globals }: ProgramContext): void {
  const config = program.command('config').description('configuration: init, check, schema');
  config
    .command('init')
    .description('write a commented starter config (and its JSON Schema beside it)')
    .option('-f, --force', 'overwrite an existing file')
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) =>
      setExit((await import('./config.js')).configInit(io, { ...opts, ...globals(cmd) })),
    );
  config
    .command('check')
    .description('validate the config and show the engines it declares')
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) =>
      setExit((await import('./config.js')).configCheck(io, { ...opts, ...globals(cmd) })),
    );
  config
    .command('schema')
    .description('print the JSON Schema of the config file')
    .action(async () => setExit((await import('./config.js')).configSchemaCommand(io)));
}

function addServeCommand(program: Command, { io, setExit, globals }: ProgramContext): void {
  program
    .command('serve')
    .description('the daemon: GitHub webhook ingress, durable inbox, dispatcher (runs until Ctrl-C)')
    .option('--port <port>', 'listen on this port (default: server.port)', intOption('--port', 0, 65535))
    .option('--host <host>', 'listen on this address (default: server.host)')
    .option('--once', 'start, print the status, and stop (a readiness check)')
    .action(async (opts, cmd: Command) => {
      const g = globals(cmd);
      setExit(
        await (await import('./serve.js')).serveCommand(io, {
          cwd: io.cwd,
          env: io.env,
          configPath: g.config,
          dataDir: g.dataDir,
          ...opts,
        }),
      );
    });
}

/** `console`: a login link to the running daemon's console (reads the config, never the database). */
/** `mcp` (the terminal connector on stdio or --http), `mcp grants`, `mcp audit`: they open the base only. */
function addMcpCommands(program: Command, { io, withBase }: ProgramContext): void {
  const mcp = addMcpServeOptions(
    program
      .command('mcp')
      .description(
        "the terminal connector: an MCP server (stdio, or --http on loopback with a bearer token) through which an operator agent drives tmux and kitty within its operator's grant (docs/connector.md)",
      ),
  )
    // `mcp audit --operator x` is the report's option, not the server's.
    .enablePositionalOptions()
    .action(async (opts: McpCommandOptions, cmd: Command) =>
      withBase(cmd, async (base) =>
        (await import('./mcp.js')).mcpServeCommand(base, io, opts, readVersion()),
      ),
    );
  addMcpReportCommands(mcp, { io, withBase });
}

function addConsoleCommand(program: Command, { io, setExit, globals }: ProgramContext): void {
  program
    .command('console')
    .description("print a single-use login link to the running daemon's browser console (valid one minute)")
    .option('--as <name>', 'who the console shows you as (default: $USER@host)')
    .option('--open', 'open the link with xdg-open (printed when xdg-open is missing)')
    .option('--json', 'JSON output: {url, expiresAt}')
    .action(async (opts, cmd: Command) => {
      const g = globals(cmd);
      const { loadConfig } = await import('../config/load.js');
      const loaded = loadConfig({ cwd: io.cwd, env: io.env, configPath: g.config, dataDir: g.dataDir });
      setExit(await (await import('./console.js')).consoleCommand(io, loaded, opts));
    });
}

/** CLI entry: parse, run, and turn every error into a clear message and an exit code. */
export async function main(argv: string[], given: Io = processIo()): Promise<number> {
  // Scrubbed once a command has opened its config: errors printed below included. Control
  // characters go first, so none can split a secret the scrubber would otherwise see whole.
  const io = showingIo(scrubbingIo(given));
  let code: number = EXIT.ok;
  const program = buildProgram(io, (c) => {
    code = c;
  });
  try {
    await program.parseAsync(argv);
    return code;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are "errors" to exitOverride; their text is already printed.
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      )
        return EXIT.ok;
      return EXIT.usage;
    }
    if (error instanceof LoopError) {
      io.err(`the-loop: ${error.message}\n`);
      if (error.hint) io.err(`  → ${error.hint}\n`);
      return USAGE_CODES.has(error.code) ? EXIT.usage : EXIT.failed;
    }
    io.err(
      `the-loop: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    return 70;
  }
}
