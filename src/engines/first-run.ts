import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { isTokenShaped } from '../core/capability-token.js';
import { LoopError } from '../core/errors.js';

/**
 * First-run dialogs of an engine's TUI, answered in its config dir before the TUI starts: nobody is
 * at a tmux session the daemon starts to click through them, and a dialog on screen would swallow
 * the first pasted prompt.
 *
 * Claude Code (observed with 2.1.197, see notes/engines.md): without `hasCompletedOnboarding` it
 * runs its onboarding (and tries the real API host); without `projects["<dir>"].hasTrustDialogAccepted`
 * it asks whether to trust the folder. Its config file is `$CLAUDE_CONFIG_DIR/.claude.json`, or
 * `~/.claude.json` when that variable is not set. The bypass-permissions warning is answered in the
 * generated `--settings` file instead (runners/tmux/claude-hooks.ts). The custom-API-key dialog is not
 * answered for a real key: approving a key means storing part of it. It is answered for the gateway's
 * capability token, which is what the TUI holds when the gateway serves it.
 */
export type FirstRunKind = 'claude';

/** Claude Code's global config is a few hundred kB at most. */
const MAX_CONFIG_BYTES = 16 * 1024 * 1024;

/** The file Claude Code keeps its global state in, for this engine environment. */
export function claudeConfigFile(env: Readonly<Record<string, string | undefined>>): string {
  const dir = env.CLAUDE_CONFIG_DIR;
  if (dir && isAbsolute(dir)) return join(dir, '.claude.json');
  const home = env.HOME;
  if (!home || !isAbsolute(home)) {
    throw new LoopError(
      'config-invalid',
      'cannot find Claude Code config: neither CLAUDE_CONFIG_DIR nor HOME is an absolute path in its environment',
      {
        hint: 'Set HOME (or CLAUDE_CONFIG_DIR) for the engine: engines.claude.env or passEnv.',
      },
    );
  }
  return join(home, '.claude.json');
}

/**
 * Make sure the engine will not stop at a first-run dialog in `cwd`. Returns what was changed (for
 * the log), or undefined when nothing needed to be. Other keys of the file are kept as they are; the
 * file is replaced atomically with its mode kept. A file that is not a JSON object is left alone and
 * reported: it is the operator's, and a dialog is better than a destroyed config.
 */
export function answerFirstRun(
  kind: FirstRunKind,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): string | undefined {
  if (kind !== 'claude') return undefined;
  const file = claudeConfigFile(env);
  let text: string | undefined;
  let mode = 0o600;
  try {
    // In the sandbox this file is in the session's own config dir, which the engine writes: no
    // symlink is followed, a FIFO does not block, and a file that is not a plain, small one is refused.
    const fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.size > MAX_CONFIG_BYTES) {
        throw new LoopError(
          'config-invalid',
          `Claude Code's config ${file} is not a regular file of a sensible size`,
        );
      }
      text = readFileSync(fd, 'utf8');
      mode = st.mode & 0o777;
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if (error instanceof LoopError) throw error;
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new LoopError('config-invalid', `cannot read Claude Code's config ${file}`, { cause: error });
    }
  }
  let config: Record<string, unknown> = {};
  if (text !== undefined && text.trim() !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (!isObject(parsed)) {
      throw new LoopError(
        'config-invalid',
        `Claude Code's config ${file} is not a JSON object; not changing it`,
        {
          hint: 'Fix or remove the file (Claude Code recreates it), then try again.',
        },
      );
    }
    config = parsed;
  }
  const changed: string[] = [];
  if (config.hasCompletedOnboarding !== true) {
    config.hasCompletedOnboarding = true;
    changed.push('onboarding done');
  }
  const projects = isObject(config.projects) ? config.projects : {};
  config.projects = projects;
  for (const dir of new Set([cwd, realpathOr(cwd)])) {
    const entry = isObject(projects[dir]) ? projects[dir] : {};
    if (entry.hasTrustDialogAccepted !== true) {
      entry.hasTrustDialogAccepted = true;
      changed.push(`trusted ${dir}`);
    }
    projects[dir] = entry;
  }
  // The custom-API-key dialog: answered for the gateway's capability token only (approving a real
  // key would store part of it). Claude Code keeps the last 20 characters of an approved key.
  const key = env.ANTHROPIC_API_KEY;
  if (key && isTokenShaped(key)) {
    const responses = isObject(config.customApiKeyResponses) ? config.customApiKeyResponses : {};
    const approved = Array.isArray(responses.approved)
      ? responses.approved.filter((k) => typeof k === 'string')
      : [];
    const suffix = key.slice(-20);
    if (!approved.includes(suffix)) {
      // Earlier sessions' tokens are revoked: keep the list short.
      responses.approved = [...approved.slice(-19), suffix];
      config.customApiKeyResponses = responses;
      changed.push('approved the capability token as the API key');
    }
  }
  if (changed.length === 0) return undefined;
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.the-loop-${randomUUID().slice(0, 8)}`;
  try {
    writeFileSync(temp, `${JSON.stringify(config, null, 2)}\n`, { mode });
    // The umask narrows the mode a file is created with: set it exactly, to keep the original's.
    chmodSync(temp, mode);
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw new LoopError('config-invalid', `cannot write Claude Code's config ${file}`, { cause: error });
  }
  return `${file}: ${changed.join(', ')}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
