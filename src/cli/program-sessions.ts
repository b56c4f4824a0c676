import type { Command } from 'commander';
import type { App } from '../main.js';
import type { Base } from '../main-base.js';
import type { Io } from './io.js';
import { intOption } from './options.js';
import { recoverForReaders } from './program-context.js';

/** Runs a command with the app opened (and closed after), setting the exit code. */
export type WithApp = (cmd: Command, fn: (app: App) => Promise<number> | number) => Promise<void>;
/** The same with the registry alone opened: what a command that only reads needs (and loads). */
export type WithBase = (cmd: Command, fn: (base: Base) => Promise<number> | number) => Promise<void>;

/** `the-loop sessions …`: see, follow, drive and end sessions. */
export function addSessionsCommands(program: Command, io: Io, withApp: WithApp, withBase: WithBase): void {
  const sessions = program.command('sessions').description('see, follow and end sessions');
  sessions
    .command('list')
    .description('active sessions (--all: closed ones too)')
    .option('-a, --all', 'include closed sessions')
    .option('-w, --work-item <ref>', 'only this work item')
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) =>
      // Reads only: the registry, without the gateway, runners and console the app would load.
      withBase(cmd, async (base) => {
        await recoverForReaders(base);
        return (await import('./sessions.js')).listSessions(base.sessions, io, opts);
      }),
    );
  sessions
    .command('show')
    .description('one session and its turns')
    .argument('<session>', 'work item or session id')
    .option('--json', 'JSON output')
    .action(async (ref: string, opts, cmd: Command) =>
      withApp(cmd, async (app) =>
        (await import('./sessions.js')).showSession(app.store, io, ref, opts, (id) =>
          app.acts.list({ sessionId: id }),
        ),
      ),
    );
  sessions
    .command('logs')
    .description("a session's recorded turn events")
    .argument('<session>', 'work item or session id')
    .option('-t, --turn <n>', 'only this turn', intOption('--turn', 1, 1_000_000))
    .option('--json', 'JSON lines output')
    .action(async (ref: string, opts, cmd: Command) =>
      withApp(cmd, async (app) => (await import('./sessions.js')).sessionLogs(app.store, io, ref, opts)),
    );
  addDriveCommands(sessions, io, withApp);
  addMoveCommand(sessions, io, withBase);
}

/** `sessions move`: hand a work item to another host sharing the PostgreSQL store. */
function addMoveCommand(sessions: Command, io: Io, withBase: WithBase): void {
  sessions
    .command('move')
    .description(
      'move a work item to another host sharing the PostgreSQL store: its host finishes the running turn, then the other takes it over',
    )
    .argument('<work-item>', 'github:owner/repo#n')
    .requiredOption('--to <host>', 'the host to move it to (see `the-loop hosts list`)')
    .option('--no-wait', 'return once the move is asked, without waiting for it to land')
    .option(
      '--timeout <seconds>',
      'how long to wait for it to land (default 600)',
      intOption('--timeout', 1, 86_400),
    )
    .option('--json', 'JSON output')
    .action(async (ref: string, opts, cmd: Command) =>
      withBase(cmd, async (base) => (await import('./sessions-move.js')).moveCommand(base, io, ref, opts)),
    );
}

/** `sessions attach|keys|send|resume|close`: join, drive, release and end a session. */
function addDriveCommands(sessions: Command, io: Io, withApp: WithApp): void {
  sessions
    .command('attach')
    .description('join a tmux-runner session in this terminal (tmux attach; detach with C-b d)')
    .argument('<session>', 'work item or session id')
    .option('-r, --read-only', 'watch without typing')
    .action(async (ref: string, opts, cmd: Command) =>
      withApp(cmd, async (app) => (await import('./sessions-terminal.js')).attachSession(app, ref, opts)),
    );
  sessions
    .command('keys')
    .description(
      'press keys in a tmux-runner session or the running turn of a pty engine (named keys like Escape Up Enter C-c; other words typed as text)',
    )
    .argument('<session>', 'work item or session id')
    .argument('<keys...>', 'keys, e.g. Escape Up y Enter')
    .option('--json', 'JSON output')
    .action(async (ref: string, keys: string[], opts, cmd: Command) =>
      withApp(cmd, async (app) =>
        (await import('./sessions-terminal.js')).keysCommand(app, io, ref, keys, opts),
      ),
    );
  sessions
    .command('send')
    .description("send text to a work item's session as its next turn (queued like a webhook)")
    .argument('<session>', 'work item')
    .argument('<text...>', 'the text')
    .option('--json', 'JSON lines output')
    .action(async (ref: string, words: string[], opts, cmd: Command) =>
      withApp(cmd, async (app) =>
        (await import('./run.js')).runCommand(app, io, ref, words.join(' '), { json: opts.json }),
      ),
    );
  sessions
    .command('resume')
    .description('release a held session (over budget: raise its ceiling with --raise)')
    .argument('<work-item|session-id>')
    .option('--raise <amount>', 'raise the ceiling that was reached by this much (turns, tokens or dollars)')
    .option('--json', 'JSON output')
    .action(async (ref: string, opts, cmd: Command) =>
      withApp(cmd, async (app) => (await import('./sessions.js')).resumeSession(app, io, ref, opts)),
    );
  addTakeoverCommands(sessions, io, withApp);
  sessions
    .command('close')
    .description('end a session (its history is kept)')
    .argument('<session>', 'work item or session id')
    .option('--json', 'JSON output')
    .action(async (ref: string, opts, cmd: Command) =>
      withApp(cmd, async (app) =>
        (await import('./sessions.js')).closeSession(app.store, app.runners, io, ref, opts),
      ),
    );
}

/** `sessions takeover|handback`: a person types in a session while its deliveries wait. */
function addTakeoverCommands(sessions: Command, io: Io, withApp: WithApp): void {
  sessions
    .command('takeover')
    .description('take a session over: its deliveries wait while you type in it (sessions attach)')
    .argument('<work-item|session-id>')
    .option(
      '--as <name>',
      'who is typing, as shown on every page and in `sessions list` (default $USER@host)',
    )
    .option('--json', 'JSON output')
    .action(async (ref: string, opts, cmd: Command) =>
      withApp(cmd, async (app) =>
        (await import('./sessions-takeover.js')).takeoverCommand(app, io, ref, opts),
      ),
    );
  sessions
    .command('handback')
    .description('hand a taken-over session back: its held deliveries run next')
    .argument('<work-item|session-id>')
    .option('--json', 'JSON output')
    .action(async (ref: string, opts, cmd: Command) =>
      withApp(cmd, async (app) =>
        (await import('./sessions-takeover.js')).handbackCommand(app, io, ref, opts),
      ),
    );
}
