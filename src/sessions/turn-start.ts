import type { SessionRecord } from '../core/ports/sessions.js';
import type { EnginePreset } from '../engines/preset.js';
import type { Logger } from '../log/logger.js';
import type { PreparedEngine } from './turn-types.js';

/** The preset with arguments added to its headless argv and to its TUI's. */
export function withArgs(preset: EnginePreset, args: string[], interactiveArgs: string[]): EnginePreset {
  if (args.length === 0 && interactiveArgs.length === 0) return preset;
  return {
    ...preset,
    extraArgs: [...preset.extraArgs, ...args],
    interactive: preset.interactive && {
      ...preset.interactive,
      args: [...preset.interactive.args, ...interactiveArgs],
    },
  };
}

/** What a turn says as it starts: what guards it, and what the config asks that cannot apply. */
export function logTurnStart(
  log: Logger,
  session: SessionRecord,
  preset: EnginePreset,
  promptBytes: number,
  prepared: PreparedEngine | undefined,
  hookCannotApply: boolean,
): void {
  log.info('turn started', {
    engine: session.engine,
    runner: session.runner,
    promptBytes,
    sandbox: prepared?.guard.sandbox,
    gateway: prepared?.guard.gateway.model,
    permissions: prepared?.guard.permissions,
  });
  for (const note of prepared?.notes ?? []) log.warn(note);
  // Said, never silent (invariant 7): what the config asks for that this runner cannot do.
  if (preset.otel?.enabled && session.runner !== 'process') {
    log.warn('otel.enabled is not used on this runner: the session is metered from its transcript', {
      runner: session.runner,
    });
  }
  if (hookCannotApply) {
    log.warn(
      'this TUI has no Claude settings hooks to carry the policy hook: its acts are judged after the turn',
      {
        runner: session.runner,
      },
    );
  }
}
