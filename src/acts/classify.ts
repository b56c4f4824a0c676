import { posix } from 'node:path';
import type { Settings } from './context.js';
import { literalArg } from './expand.js';
import { classifyWritePath, patchPaths } from './files.js';
import { newBudget } from './shell-ast.js';
import { type ActDetail, type ClassifiedAct, type ClassifyContext, LIMITS } from './types.js';
import { bound, Walker } from './walk.js';

/**
 * Act extraction: which consequential acts (pushes, merges, branch deletions, releases, publishes,
 * destructive deletes, writes into .git or outside the workspace) a shell command or a tool use
 * performs. Pure: no file, process or network is touched; the same input gives the same acts.
 *
 * - `classifyCommand(text, ctx)`: a shell command line (Claude `Bash`, Codex `command_execution`,
 *   Gemini `run_shell_command`).
 * - `classifyArgv(argv, ctx)`: a command given as an argv array (older Codex items).
 * - `classifyToolUse({ name, input }, ctx)`: a tool use from any engine's turn events.
 *
 * None of them throws. Input that cannot be read as a command gives one `unreadable-input` act;
 * input that was only partly read (cut at 64 KiB, nested too deep, too many commands) adds a
 * `truncated-input` act, and acts found in a cut command carry `detail.truncated`. Unknown tool names
 * give no act. See docs/acts.md for the kinds, the evasions and what is not seen.
 */

export {
  ACT_KINDS,
  type ActDetail,
  type ActKind,
  type ClassifiedAct,
  type ClassifyContext,
  EVASIONS,
  type Evasion,
  LIMITS,
} from './types.js';

/** Where relative paths resolve when neither `workspace` nor `cwd` is given: absolute paths are outside. */
const UNKNOWN_WORKSPACE = '/.unknown-workspace';

interface Resolved {
  settings: Settings;
  cwd: string;
  branch: string | undefined;
}

const text = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;

function resolveContext(ctx: ClassifyContext | undefined): Resolved {
  const c = (ctx && typeof ctx === 'object' ? ctx : {}) as Record<string, unknown>;
  const root = text(c.workspace) ?? text(c.cwd);
  const workspace = root === undefined ? UNKNOWN_WORKSPACE : posix.resolve('/', root);
  const cwdText = text(c.cwd);
  const home = text(c.home);
  return {
    settings: {
      workspace,
      protectedBranches: Array.isArray(c.protectedBranches)
        ? c.protectedBranches.filter((b): b is string => typeof b === 'string' && b !== '')
        : [],
      home: home === undefined ? undefined : posix.resolve('/', home),
    },
    cwd: cwdText === undefined ? workspace : posix.resolve(workspace, cwdText),
    branch: text(c.currentBranch),
  };
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function unreadable(command: string, detail: ActDetail): ClassifiedAct[] {
  return [{ kind: 'unreadable-input', command: bound(command), detail }];
}

/** Runs a classification; a failure of the classifier itself is reported as an act, never thrown. */
function guarded(command: string, fn: () => ClassifiedAct[]): ClassifiedAct[] {
  try {
    return fn();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return unreadable(command, { reason: `classifier error: ${message.slice(0, 200)}` });
  }
}

/** The acts of a shell command line. */
export function classifyCommand(
  command: string,
  ctx: ClassifyContext = {},
  options: { engineWrapped?: boolean } = {},
): ClassifiedAct[] {
  if (typeof command !== 'string') {
    return unreadable(String(typeName(command)), {
      reason: 'command is not a string',
      inputType: typeName(command),
    });
  }
  return guarded(command, () => {
    const { settings, cwd, branch } = resolveContext(ctx);
    let input = command;
    const truncated = command.length > LIMITS.input;
    if (truncated) {
      input = command.slice(0, LIMITS.input);
      // Do not leave half a surrogate pair at the cut.
      if (/[\uD800-\uDBFF]$/.test(input)) input = input.slice(0, -1);
    }
    const walker = new Walker(
      settings,
      newBudget(LIMITS.depth, LIMITS.work),
      truncated,
      options.engineWrapped,
    );
    walker.script(input, walker.initialState(cwd, branch), [], 0);
    walker.finish(input);
    if (truncated) {
      walker.acts.push({
        kind: 'truncated-input',
        command: bound(input),
        detail: { reason: 'length', length: command.length, limit: LIMITS.input, truncated: true },
      });
    }
    return walker.acts;
  });
}

/** The acts of a command given as an argv array (each element one argument, no shell parsing). */
export function classifyArgv(
  argv: readonly unknown[],
  ctx: ClassifyContext = {},
  options: { engineWrapped?: boolean } = {},
): ClassifiedAct[] {
  const shown = Array.isArray(argv) ? argv.map(String).join(' ') : String(argv);
  if (!Array.isArray(argv) || !argv.every((a) => typeof a === 'string')) {
    return unreadable(shown, { reason: 'argv is not an array of strings', inputType: typeName(argv) });
  }
  return guarded(shown, () => {
    const { settings, cwd, branch } = resolveContext(ctx);
    const walker = new Walker(settings, newBudget(LIMITS.depth, LIMITS.work), false, options.engineWrapped);
    const args = (argv as string[]).map((a) =>
      literalArg(a.length > LIMITS.input ? a.slice(0, LIMITS.input) : a),
    );
    walker.argv(args, {
      seg: shown,
      state: walker.initialState(cwd, branch),
      ev: [],
      depth: 0,
      stdin: undefined,
    });
    walker.finish(shown);
    return walker.acts;
  });
}

/** Shell tools of each engine: Claude `Bash`, Codex `shell`/`command_execution`, Gemini `run_shell_command`. */
const SHELL_TOOLS = new Set([
  'Bash',
  'shell',
  'local_shell',
  'container.exec',
  'exec_command',
  'command_execution',
  'run_shell_command',
]);

/** File tools and the input field holding the path: Claude Write/Edit/MultiEdit/NotebookEdit, Gemini write_file/replace. */
const FILE_TOOLS: Record<string, string> = {
  Write: 'file_path',
  Edit: 'file_path',
  MultiEdit: 'file_path',
  NotebookEdit: 'notebook_path',
  write_file: 'file_path',
  replace: 'file_path',
};

/** The acts of one tool use, as the engines' parsers emit it (`TurnEvent` of type `tool-use`). */
export function classifyToolUse(
  tool: { name: string; input: unknown },
  ctx: ClassifyContext = {},
): ClassifiedAct[] {
  if (!tool || typeof tool !== 'object' || typeof tool.name !== 'string') {
    return unreadable(String(typeName(tool)), {
      reason: 'tool use is not an object with a name',
      inputType: typeName(tool),
    });
  }
  const { name } = tool;
  const input = tool.input;
  const fields =
    input && typeof input === 'object' && !Array.isArray(input)
      ? (input as Record<string, unknown>)
      : undefined;
  return guarded(name, () => {
    if (SHELL_TOOLS.has(name)) return shellTool(name, input, fields, ctx);
    const pathField = Object.hasOwn(FILE_TOOLS, name) ? FILE_TOOLS[name] : undefined;
    if (pathField !== undefined) {
      const path = fields?.[pathField];
      if (typeof path !== 'string' || path === '') {
        return unreadable(name, { reason: `${pathField} is not a string`, inputType: typeName(path) });
      }
      return fileAct(name, [path], ctx);
    }
    if (name === 'apply_patch') return patchTool(input, fields, ctx);
    return [];
  });
}

/** Codex's shell tools: every command arrives wrapped in `bash -lc '…'` by Codex itself (not an evasion). */
const WRAPPING_TOOLS = new Set(['shell', 'command_execution', 'local_shell', 'exec_command']);

function shellTool(
  name: string,
  input: unknown,
  fields: Record<string, unknown> | undefined,
  ctx: ClassifyContext,
): ClassifiedAct[] {
  const command = fields?.command ?? fields?.cmd;
  // Gemini runs in `dir_path` (relative to its workspace), Codex in `workdir`.
  const dir = text(fields?.dir_path) ?? text(fields?.directory) ?? text(fields?.workdir) ?? text(fields?.cwd);
  const base = resolveContext(ctx);
  const inner: ClassifyContext = dir === undefined ? ctx : { ...ctx, cwd: posix.resolve(base.cwd, dir) };
  const options = { engineWrapped: WRAPPING_TOOLS.has(name) };
  if (typeof command === 'string') return classifyCommand(command, inner, options);
  if (Array.isArray(command) && command.length > 0 && command.every((a) => typeof a === 'string')) {
    return classifyArgv(command, inner, options);
  }
  return unreadable(name, {
    reason: fields ? 'command is not a string' : 'input is not an object',
    inputType: typeName(fields ? command : input),
  });
}

function fileAct(tool: string, paths: string[], ctx: ClassifyContext): ClassifiedAct[] {
  const { settings, cwd } = resolveContext(ctx);
  const acts: ClassifiedAct[] = [];
  for (const path of paths) {
    const act = classifyWritePath(path, cwd, settings);
    if (act)
      acts.push({ kind: act.kind, command: bound(`${tool} ${path}`), detail: { ...act.detail, via: tool } });
  }
  return acts;
}

/** Codex `apply_patch` (file_change items): `changes` as [{path}] or {path: …}, or the patch text. */
function patchTool(
  input: unknown,
  fields: Record<string, unknown> | undefined,
  ctx: ClassifyContext,
): ClassifiedAct[] {
  const changes = fields?.changes;
  const paths: string[] = [];
  if (Array.isArray(changes)) {
    for (const change of changes) {
      const path =
        change && typeof change === 'object' ? (change as Record<string, unknown>).path : undefined;
      if (typeof path === 'string') paths.push(path);
    }
  } else if (changes && typeof changes === 'object') paths.push(...Object.keys(changes));
  const patch = fields?.input ?? fields?.patch ?? (typeof input === 'string' ? input : undefined);
  if (typeof patch === 'string') paths.push(...patchPaths(patch.slice(0, LIMITS.input)));
  if (paths.length === 0) {
    return unreadable('apply_patch', {
      reason: 'no paths in the patch input',
      inputType: typeName(changes ?? input),
    });
  }
  return fileAct('apply_patch', paths, ctx);
}
