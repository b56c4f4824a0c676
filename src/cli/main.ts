import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { LoopError } from '../core/errors.js';
import { addHostsCommands } from './hosts.js';
import { EXIT, type Io, processIo, scrubbingIo, showingIo } from './io.js';
import { addMcpReportCommands, addMcpServeOptions, type McpCommandOptions } from './mcp.js';
import { intOption } from './options.js';
import { type ProgramContext, programContext } from './program-context.js';
import { addEventsCommands, addLedgerCommands } from './program-ledger.js';
import { addSessionsCommands } from './program-sessions.js';
import { addStoreCommands } from './store.js';

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

/**
 * The top-level commands, in the order help lists them, with what adds each group. A command line
 * naming one gets only its group (a command starts without defining the forty others); any other
 * (no command, `help`, a typo commander suggests a fix for) gets them all.
 */
const COMMAND_GROUPS: ReadonlyArray<
  [readonly string[], (program: Command, context: ProgramContext) => void]
> = [
  [['run'], (p, c) => addRunCommand(p, c)],
  [['sessions'], (p, c) => addSessionsCommands(p, c.io, c.withApp, c.withBase)],
  [['events'], (p, c) => addEventsCommands(p, c)],
  [['usage', 'acts'], (p, c) => addLedgerCommands(p, c)],
  [['doctor'], (p, c) => addDoctorCommand(p, c)],
  [['config'], (p, c) => addConfigCommands(p, c)],
  [['serve'], (p, c) => addServeCommand(p, c)],
  [['console'], (p, c) => addConsoleCommand(p, c)],
  [['mcp'], (p, c) => addMcpCommands(p, c)],
  [['store'], (p, c) => addStoreCommands(p, c)],
  [['hosts'], (p, c) => addHostsCommands(p, c)],
];

/** The command an argv names (`node the-loop [global options] <command> …`), if it names one. */
export function commandOf(argv: readonly string[]): string | undefined {
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i] as string;
    // `--help <command>` prints the program's help, which lists every command.
    if (arg === '--' || arg === '-h' || arg === '--help') return undefined;
    if (arg === '-c' || arg === '--config' || arg === '--data-dir') i++;
    else if (!arg.startsWith('-'))
      return COMMAND_GROUPS.some(([names]) => names.includes(arg)) ? arg : undefined;
  }
  return undefined;
}

/** The program; with `only`, just the group of that top-level command. */
export function buildProgram(io: Io, setExit: (code: number) => void, only?: string): Command {
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
  for (const [names, add] of COMMAND_GROUPS) if (!only || names.includes(only)) add(program, context);
  return program;
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

/**
 * Whether the argv is a command that reads, prints its answer and ends — `sessions list|show`,
 * `events list|show`, `usage` (not `usage scan`), `acts`, `config …` — named exactly: its output
 * is written directly (`processIo`'s `direct`). Anything else writes through Node's streams.
 */
export function answersAtOnce(argv: readonly string[]): boolean {
  const command = commandOf(argv);
  if (!command) return false;
  const rest = argv.slice(argv.indexOf(command) + 1);
  switch (command) {
    case 'sessions':
    case 'events':
      return rest[0] === 'list' || rest[0] === 'show';
    case 'usage':
      return !rest.includes('scan');
    case 'acts':
    case 'config':
      return true;
    default:
      return false;
  }
}

/** CLI entry: parse, run, and turn every error into a clear message and an exit code. */
export async function main(
  argv: string[],
  given: Io = processIo({ direct: answersAtOnce(argv) }),
): Promise<number> {
  // Scrubbed once a command has opened its config: errors printed below included. Control
  // characters go first, so none can split a secret the scrubber would otherwise see whole.
  const io = showingIo(scrubbingIo(given));
  let code: number = EXIT.ok;
  const program = buildProgram(
    io,
    (c) => {
      code = c;
    },
    commandOf(argv),
  );
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
