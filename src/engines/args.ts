import { LoopError } from '../core/errors.js';
import type { EnginePreset } from './preset.js';

export interface HeadlessTurnArgs {
  /** The engine session id to resume, or for an `assign` engine the id to pin on the first turn. */
  engineSessionId: string | undefined;
  /** True when this turn starts the engine session. */
  first: boolean;
  prompt: string;
}

const fill = (template: string, values: Record<string, string | undefined>): string =>
  template.replace(/\{(sessionId|model|settingsFile)\}/g, (whole, key: string) => {
    const value = values[key];
    if (value === undefined) throw new LoopError('internal', `argv placeholder ${whole} has no value`);
    return value;
  });

/**
 * The argv (without the binary) of one headless turn: common args, then the first-turn or resume
 * args, then user extras, then the prompt prefix and the turn text as the final argument. Pure.
 */
export function buildHeadlessArgv(preset: EnginePreset, turn: HeadlessTurnArgs): string[] {
  const values = { sessionId: turn.engineSessionId, model: preset.model };
  const { headless } = preset;
  let phase: readonly string[];
  if (turn.first) {
    phase = headless.start;
  } else {
    if (!headless.resume) {
      throw new LoopError(
        'engine-unsupported',
        'this engine cannot resume a session; each turn starts a new one',
      );
    }
    if (!turn.engineSessionId) {
      throw new LoopError(
        'session-missing',
        'no engine session id recorded for this session, so it cannot be resumed',
        {
          hint: 'Close the session (`the-loop sessions close <work-item>`) and start a new one.',
        },
      );
    }
    phase = headless.resume;
  }
  // The turn text is spliced into promptArg by plain concatenation: nothing in it is ever expanded.
  const [before = '', after = ''] = headless.promptArg.split('{prompt}');
  return [...headless.args, ...phase, ...preset.extraArgs, ...headless.promptPrefix]
    .map((a) => fill(a, values))
    .concat(`${before}${turn.prompt}${after}`);
}

/** The argv (without the binary) of the interactive TUI. */
export function buildInteractiveArgv(
  preset: EnginePreset,
  engineSessionId: string,
  settingsFile?: string,
): string[] {
  if (!preset.interactive)
    throw new LoopError('engine-unsupported', 'this engine declares no interactive mode');
  return preset.interactive.args.map((a) =>
    fill(a, { sessionId: engineSessionId, model: preset.model, settingsFile }),
  );
}
