import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { hookCommandLine, writePrivateJson } from '../engines/claude-hooks.js';
import type { PolicyHookKind } from '../engines/preset.js';
import type { Policy } from './decide.js';

/**
 * Enforcement before the act, for engines with a pre-tool hook: Claude Code's PreToolUse command
 * hook, registered in a `--settings` file next to the session's policy. The hook
 * (`bin/the-loop-policy-hook.js`) refuses a tool call the policy denies (exit 2 with the reason), so
 * the act never runs and the turn's events show it `blocked`.
 */
export const POLICY_FILE = 'policy.json';
/** The tool_use_ids the hook refused (one JSON line each), beside the policy. */
export const REFUSALS_FILE = 'refusals.jsonl';
/** What is read of the refusals file: its last part (a session refuses a few calls, not millions). */
const REFUSALS_READ_BYTES = 1024 * 1024;

/** The tool calls the policy hook refused in this session directory (unreadable lines are skipped). */
export function readRefusals(dir: string): Set<string> {
  const ids = new Set<string>();
  let text: string;
  try {
    const fd = openSync(join(dir, REFUSALS_FILE), 'r');
    try {
      const size = fstatSync(fd).size;
      const length = Math.min(size, REFUSALS_READ_BYTES);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      text = buffer.toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return ids; // None yet.
  }
  for (const line of text.split('\n')) {
    try {
      const id = (JSON.parse(line) as { toolUseId?: unknown }).toolUseId;
      if (typeof id === 'string') ids.add(id);
    } catch {
      // A partial first line (the read started mid-file) or garbage: skipped.
    }
  }
  return ids;
}
export const POLICY_SETTINGS_FILE = 'policy-settings.json';

/** Tools the hook looks at: the shell and the file tools (everything else carries no act). */
export const POLICY_HOOK_MATCHER = 'Bash|Write|Edit|MultiEdit|NotebookEdit';

export interface PolicyHook {
  /** The hook's command line (our own absolute paths, single-quoted: Claude runs it through a shell). */
  command: string;
  matcher: string;
  /** A `--settings` file registering just this hook (headless turns). */
  settingsFile: string;
}

/**
 * Write the session's policy and the settings that register the hook (0600, replaced atomically).
 * Rewritten before every turn, so a changed config applies at once — also to a TUI started earlier,
 * whose settings name the same policy file.
 */
export function writePolicyHook(input: {
  dir: string;
  policy: Policy;
  workspace: string;
  node: string;
  hookScript: string;
}): PolicyHook {
  const policyFile = writePrivateJson(input.dir, POLICY_FILE, {
    v: 1,
    policy: input.policy,
    workspace: input.workspace,
  });
  // Claude Code runs the command through a shell: only our own absolute paths, each single-quoted.
  const command = hookCommandLine([
    ['node binary path', input.node],
    ['policy hook script path', input.hookScript],
    ['policy file path', policyFile],
  ]);
  const settingsFile = writePrivateJson(input.dir, POLICY_SETTINGS_FILE, {
    hooks: {
      PreToolUse: [{ matcher: POLICY_HOOK_MATCHER, hooks: [{ type: 'command', command, timeout: 30 }] }],
    },
  });
  return { command, matcher: POLICY_HOOK_MATCHER, settingsFile };
}

/**
 * The policy hook of a session whose engine's preset names one (`policyHook`), written for its next
 * turn; none for an engine without (a forbidden act is then found in the turn's events).
 */
export function sessionPolicyHook(
  kind: PolicyHookKind | undefined,
  input: () => Parameters<typeof writePolicyHook>[0],
): PolicyHook | undefined {
  switch (kind) {
    case 'claude-pretooluse':
      return writePolicyHook(input());
    case undefined:
      return undefined;
  }
}
