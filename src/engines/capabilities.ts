import type { EnginePreset } from './preset.js';

/**
 * What an engine preset's fields mean, without its schema: the names and shapes the code needs at
 * run time, and `capabilitiesOf`. Kept apart from preset.ts so that code which only reads presets
 * (the runners, the session commands) loads no schema library.
 */

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The placeholders an argv template may use. Anything else in braces is left as literal text. */
export const PLACEHOLDERS = ['{sessionId}', '{model}', '{settingsFile}', '{gatewayUrl}'] as const;

/** Kinds of merge-policy hooks an engine can run before a tool (see `policyHook`). */
export const POLICY_HOOKS = ['claude-pretooluse'] as const;
export type PolicyHookKind = (typeof POLICY_HOOKS)[number];
/** How a headless turn is given each kind of policy hook: argv naming its settings file. */
export const POLICY_HOOK_ARGS: Record<PolicyHookKind, readonly string[]> = {
  'claude-pretooluse': ['--settings', '{settingsFile}'],
};

export const PROTOCOLS = ['claude-stream-json', 'codex-json', 'gemini-stream-json', 'text'] as const;
export type ProtocolName = (typeof PROTOCOLS)[number];

export const MODEL_API_NAMES = ['anthropic', 'openai', 'gemini'] as const;

/** Which meter a protocol provides. `none` means turns on it are recorded as unmetered. */
export const METER_OF_PROTOCOL: Record<ProtocolName, 'stream-json' | 'codex-json' | 'gemini-json' | 'none'> =
  {
    'claude-stream-json': 'stream-json',
    'codex-json': 'codex-json',
    'gemini-stream-json': 'gemini-json',
    text: 'none',
  };

export interface EngineCapabilities {
  /** Later turns continue the same engine session (the model sees earlier turns). */
  resume: boolean;
  /** The session id is chosen by us before the engine starts. */
  preassignedId: boolean;
  /** The session id is read from the engine's output. */
  capturedId: boolean;
  /** The engine has an interactive TUI. */
  interactive: boolean;
  /** The TUI can run in tmux: it needs an interactive mode and a pre-assigned id (nothing to parse from a TUI). */
  tmux: boolean;
  /** The meter the protocol provides (`none`: unmetered). */
  meter: (typeof METER_OF_PROTOCOL)[ProtocolName];
}

export function capabilitiesOf(preset: EnginePreset): EngineCapabilities {
  const resume = preset.headless.resume !== undefined && preset.sessionId !== 'none';
  const interactive = preset.interactive !== undefined;
  return {
    resume,
    preassignedId: preset.sessionId === 'assign',
    capturedId: preset.sessionId === 'capture',
    interactive,
    tmux:
      interactive &&
      preset.sessionId === 'assign' &&
      (preset.interactive?.args ?? []).some((a) => a.includes('{sessionId}')),
    meter: METER_OF_PROTOCOL[preset.protocol],
  };
}
