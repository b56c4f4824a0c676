import { isAbsolute } from 'node:path';
import { LoopError } from '../core/errors.js';
import { writePrivateFile } from '../os/private-file.js';

/**
 * Claude Code hooks for sessions the daemon cannot read a result stream from (the TUI in tmux):
 * a generated `--settings` file registers `bin/the-loop-hook.js` for each hook event, the hook
 * appends the event to a per-session events file, and `HookEventsTail` reads it back. `Stop` and
 * `StopFailure` end turns (SPEC invariant 1); `SessionStart` and `UserPromptSubmit` confirm
 * readiness and delivery.
 *
 * Settings shape, from Claude Code 2.1.197's own settings schema (zod, in the CLI bundle):
 *   hooks: Partial<Record<HookEvent, Array<{ matcher?: string; hooks: Array<HookCommand> }>>>
 *   HookCommand (type "command"): { type, command, args?, shell?, timeout? (seconds), async?, … }
 * An unknown event name makes the whole settings file invalid, so names are checked here.
 * `matcher` filters on a per-event field (tool_name for tool events, `source` for SessionStart,
 * `reason` for SessionEnd, …); an absent matcher matches everything.
 */

/** Hook event names Claude Code 2.1.197 accepts in settings (its `hooks` record keys). */
export const CLAUDE_HOOK_EVENTS = [
  'PreToolUse',
  'PostToolUse',
  'PostToolUseFailure',
  'PostToolBatch',
  'Notification',
  'UserPromptSubmit',
  'UserPromptExpansion',
  'SessionStart',
  'SessionEnd',
  'Stop',
  'StopFailure',
  'SubagentStart',
  'SubagentStop',
  'PreCompact',
  'PostCompact',
  'PermissionRequest',
  'PermissionDenied',
  'Setup',
  'TeammateIdle',
  'TaskCreated',
  'TaskCompleted',
  'Elicitation',
  'ElicitationResult',
  'ConfigChange',
  'WorktreeCreate',
  'WorktreeRemove',
  'InstructionsLoaded',
  'CwdChanged',
  'FileChanged',
  'MessageDisplay',
] as const;
export type ClaudeHookEventName = (typeof CLAUDE_HOOK_EVENTS)[number];

/** What a session's turn accounting needs (issue 4): readiness, delivery, turn end, session end. */
export const DEFAULT_HOOK_EVENTS: readonly ClaudeHookEventName[] = [
  'SessionStart',
  'UserPromptSubmit',
  'Stop',
  'StopFailure',
  'SessionEnd',
  // A permission prompt is up: the session is shown waiting for a person.
  'Notification',
];

/** Events whose matcher is a tool name: given `*` (every tool) explicitly. */
const TOOL_MATCHED = new Set<string>([
  'PreToolUse',
  'PostToolUse',
  'PostToolUseFailure',
  'PermissionRequest',
]);

/**
 * The forwarder only appends a line; 30 s bounds a wedged file system (Claude's default is 600 s).
 * A timed-out hook is a non-blocking error for Claude, so the engine goes on either way.
 */
const HOOK_TIMEOUT_SECONDS = 30;

export interface ClaudeCommandHook {
  type: 'command';
  command: string;
  timeout?: number;
}

export interface ClaudeHookMatcher {
  matcher?: string;
  hooks: ClaudeCommandHook[];
}

export interface ClaudeSettings {
  hooks: Partial<Record<ClaudeHookEventName, ClaudeHookMatcher[]>>;
  /** Skips the bypass-permissions warning dialog in the TUI (see notes/engines.md). */
  skipDangerousModePermissionPrompt: true;
}

export interface ClaudeHookSettingsInput {
  /** Absolute path of the node binary that runs the hook (usually `process.execPath`). */
  node: string;
  /** Absolute path of `bin/the-loop-hook.js`. */
  hookScript: string;
  /** Absolute path of the session's events file. */
  eventsFile: string;
  events?: readonly string[];
  timeoutSeconds?: number;
  /** Another PreToolUse command (the merge policy's), registered beside ours. */
  preToolUse?: { matcher: string; command: string } | undefined;
}

/** One of our own paths, checked before it goes anywhere near a shell. */
export function checkPath(what: string, path: string): string {
  if (path.length === 0 || !isAbsolute(path)) {
    throw new LoopError('internal', `${what} must be an absolute path, got ${JSON.stringify(path)}`);
  }
  if (/[\n\r\0]/.test(path)) {
    throw new LoopError('internal', `refusing ${what} with a newline or NUL: ${JSON.stringify(path)}`);
  }
  return path;
}

/** POSIX single quotes: nothing inside is special except `'`, written as `'\''`. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", "'\\''")}'`;
}

/**
 * The hook's command line. Claude Code runs `command` through a shell (`/bin/sh -c` on POSIX), so it
 * is built only from our own absolute paths, each single-quoted; no outside text ever reaches it.
 */
export function claudeHookCommand(
  input: Pick<ClaudeHookSettingsInput, 'node' | 'hookScript' | 'eventsFile'>,
): string {
  return hookCommandLine([
    ['node binary path', input.node],
    ['hook script path', input.hookScript],
    ['events file path', input.eventsFile],
  ]);
}

/** A hook command line of our own absolute paths (each checked, then single-quoted). */
export function hookCommandLine(paths: ReadonlyArray<readonly [what: string, path: string]>): string {
  return paths.map(([what, path]) => shellQuote(checkPath(what, path))).join(' ');
}

const isClaudeHookEvent = (name: string): name is ClaudeHookEventName =>
  (CLAUDE_HOOK_EVENTS as readonly string[]).includes(name);

export function claudeHookSettings(input: ClaudeHookSettingsInput): ClaudeSettings {
  const command = claudeHookCommand(input);
  const timeout = input.timeoutSeconds ?? HOOK_TIMEOUT_SECONDS;
  if (!Number.isInteger(timeout) || timeout <= 0) {
    throw new LoopError(
      'internal',
      `hook timeout must be a positive whole number of seconds, got ${timeout}`,
    );
  }
  const hooks: ClaudeSettings['hooks'] = {};
  for (const name of input.events ?? DEFAULT_HOOK_EVENTS) {
    if (!isClaudeHookEvent(name)) {
      throw new LoopError('internal', `unknown Claude Code hook event ${JSON.stringify(name)}`, {
        hint: `known events: ${CLAUDE_HOOK_EVENTS.join(', ')}`,
      });
    }
    const entry: ClaudeHookMatcher = { hooks: [{ type: 'command', command, timeout }] };
    hooks[name] = [TOOL_MATCHED.has(name) ? { matcher: '*', ...entry } : entry];
  }
  if (input.preToolUse) {
    hooks.PreToolUse = [
      ...(hooks.PreToolUse ?? []),
      {
        matcher: input.preToolUse.matcher,
        hooks: [{ type: 'command', command: input.preToolUse.command, timeout }],
      },
    ];
  }
  return { hooks, skipDangerousModePermissionPrompt: true };
}

export const SETTINGS_FILE_NAME = 'claude-settings.json';

/** Write the settings for `claude --settings <path>`: 0600, replaced atomically. Returns the path. */
export function writeSettingsFile(dir: string, settings: ClaudeSettings): string {
  return writePrivateJson(dir, SETTINGS_FILE_NAME, settings);
}

/**
 * Write `value` as JSON to `<dir>/<name>` (dir 0700, file 0600), replaced atomically (temp file,
 * then rename): a reader never sees half a file. Returns the path.
 */
export function writePrivateJson(dir: string, name: string, value: unknown): string {
  checkPath('state directory', dir);
  return writePrivateFile(dir, name, `${JSON.stringify(value, null, 2)}\n`);
}
