import { LoopError } from '../core/errors.js';
import type { SessionRecord } from '../core/ports/sessions.js';
import { capabilitiesOf, POLICY_HOOK_ARGS } from '../engines/capabilities.js';
import type { EnginePreset } from '../engines/preset.js';
import { whichBinary } from '../engines/which.js';
import type { Logger } from '../log/logger.js';
import type { EngineFacts, PlannedTurn } from './plan-turn.js';
import type { PreparedEngine } from './turn-types.js';

/** What planning a turn needs of its engine, read from its preset's fields (invariant 8). */
export function engineFacts(preset: EnginePreset): EngineFacts {
  return {
    protocolMeter: capabilitiesOf(preset).meter,
    transcript: preset.interactive?.transcript !== undefined,
    settingsHooks: preset.interactive?.hooks === 'claude-settings',
    policyHookArgs: preset.policyHook ? POLICY_HOOK_ARGS[preset.policyHook] : undefined,
    otel: preset.otel?.enabled === true,
  };
}

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
  promptBytes: number,
  prepared: PreparedEngine | undefined,
  planned: PlannedTurn,
): void {
  log.info('turn started', {
    engine: session.engine,
    runner: session.runner,
    promptBytes,
    sandbox: prepared?.guard.sandbox,
    gateway: prepared?.guard.gateway.model,
    permissions: prepared?.guard.permissions,
  });
  // Said, never silent (invariant 7): what guards it, and what the config asks that cannot apply.
  for (const warning of planned.warnings) log.warn(warning.message, warning.fields);
}

/** The engine's binary on PATH, or a clear error naming how to install it. */
export function resolveBinary(
  preset: EnginePreset,
  engineName: string,
  env: Record<string, string>,
  cwd: string,
): string {
  const found = whichBinary(preset.binary, env.PATH, cwd);
  if (!found) {
    throw new LoopError(
      'binary-missing',
      `the ${engineName} engine's binary "${preset.binary}" was not found on PATH`,
      {
        hint: preset.install
          ? `Install it: ${preset.install} — or set engines.${engineName}.binary to its path. \`the-loop doctor\` checks every engine.`
          : `Set engines.${engineName}.binary to its path. \`the-loop doctor\` checks every engine.`,
      },
    );
  }
  return found;
}
