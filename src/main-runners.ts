import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoadedConfig } from './config/load.js';
import type { Logger } from './log/logger.js';
import type { Base } from './main-base.js';
import { ProcessRunner, type ProcessRunnerOptions } from './runners/process/process-runner.js';
import { adoptingRunners, type Runner } from './runners/runner.js';
import { Tmux } from './runners/tmux/tmux.js';
import { TmuxRunner } from './runners/tmux/tmux-runner.js';
import { recoverLostTurns } from './sessions/recovery.js';

/**
 * The runners and the tmux client (part of the composition root, beside main.ts). Apart from
 * main.ts, `the-loop doctor` loads it for the tmux client alone (neither the dispatcher nor the server).
 */

/** A tmux client on `socket` (undefined: the user's default server). */
export const tmuxClient = (socket?: string): Tmux => new Tmux({ socket });

/** The runners, by name. */
export function createRunners(
  loaded: LoadedConfig,
  logger: Logger,
  keys: Pick<ProcessRunnerOptions, 'env' | 'sessionStatus'>,
): Record<string, Runner> {
  return {
    process: new ProcessRunner({ dataDir: loaded.dataDir, ...keys }),
    tmux: new TmuxRunner({
      tmux: tmuxClient(loaded.config.tmux.socket),
      stateRoot: join(loaded.dataDir, 'sessions'),
      hookScript: fileURLToPath(new URL('../bin/the-loop-hook.js', import.meta.url)),
      launcher: fileURLToPath(new URL('../bin/the-loop-launch.js', import.meta.url)),
      width: loaded.config.tmux.width,
      height: loaded.config.tmux.height,
      readyMs: loaded.config.tmux.readySeconds * 1000,
      logger,
    }),
  };
}

/**
 * What a command that shows turns does first, as the app does when it starts: running turns whose
 * owner process died are marked lost (those of runners that adopt their turns are left to the
 * daemon), so `sessions list` and `events list`/`show` never show a dead turn as running.
 */
export async function recoverForReaders(base: Base): Promise<void> {
  const runners = createRunners(base.loaded, base.logger, {});
  await recoverLostTurns(base.sessions, adoptingRunners(runners), base.logger);
}
