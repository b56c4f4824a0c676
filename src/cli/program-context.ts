import type { Command } from 'commander';
import type { Base } from '../main-base.js';
import { pidAlive } from '../os/proc.js';
import type { Io } from './io.js';
import type { WithApp } from './program-sessions.js';

export interface GlobalOptions {
  config?: string;
  dataDir?: string;
}

export /** What each group of commands is given: the IO, the exit code's setter, and how to open the app. */
interface ProgramContext {
  io: Io;
  setExit: (code: number) => void;
  globals: (cmd: Command) => GlobalOptions;
  withApp: WithApp;
  withBase: (
    cmd: Command,
    fn: (base: Base) => Promise<number> | number,
    options?: { migrateStore?: boolean },
  ) => Promise<void>;
}

/**
 * Command modules and the app are imported when a command runs, not when the CLI starts: each
 * command loads what it uses (the ledger commands never load the runners or the server).
 */
export function programContext(io: Io, setExit: (code: number) => void): ProgramContext {
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
  const withBase: ProgramContext['withBase'] = async (cmd, fn, options) => {
    const g = globals(cmd);
    const { openBase } = await import('../main-base.js');
    const base = await openBase({
      cwd: io.cwd,
      env: io.env,
      configPath: g.config,
      dataDir: g.dataDir,
      migrateStore: options?.migrateStore,
    });
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

/**
 * What a command that shows turns without the app does first, as the app does when it starts:
 * running turns of dead processes are marked lost (on SQLite only). The runners (they say which turns to leave to
 * the daemon) are loaded only when a running turn's owner is gone — with none (no turn running, or
 * a live daemon owning them) there is nothing to recover.
 */
export async function recoverForReaders(base: Base): Promise<void> {
  // A shared store's turns may be other hosts': their daemons (and their leases) settle them, never
  // a reading command judging by this machine's process table.
  if (base.stores.recovery === 'leases') return;
  if (await base.sessions.anyTurnOrphaned(pidAlive))
    await (await import('../main-runners.js')).recoverForReaders(base);
}
