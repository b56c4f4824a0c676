import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { SandboxConfig } from '../config/gateway-schema.js';
import { bwrapArgv } from '../sandbox/bwrap.js';
import { credentialPaths, expandPath, runtimeHiddenPaths, SYSTEM_HIDDEN_PATHS } from '../sandbox/paths.js';
import { resolverConfigDir, resolveSandboxSpec } from '../sandbox/resolve.js';

/**
 * What one session's engine may see, as a sandbox: its workspace and its own config directories
 * read-write; its session's state (policy, hook settings, git and gh config) read-only; the files
 * its hooks write; the gateway's socket. Hidden: the-loop's data dir (every other session's state and
 * worktrees, the database, the keys), the config file, the operator's credential files, and the
 * sockets of the system. The rest of the file system is read-only; /tmp is private.
 */
export interface SandboxPlanInput {
  workspace: string;
  stateDir: string;
  /** Files the engine's hooks append to (they must exist). */
  hookFiles: string[];
  dataDir: string;
  configPath: string | null;
  /** the-loop's own install (its hook scripts), readable even when it lives under /tmp. */
  packageRoot: string;
  /** The engine's install, when it lives where the sandbox would hide it (under /tmp). */
  binaryRoot: string | undefined;
  socketPath: string | undefined;
  /** The preset's own writable paths (`~`, `$VAR`), expanded against the engine's environment. */
  engineWritable: readonly string[];
  engineEnv: Readonly<Record<string, string | undefined>>;
  /** The daemon's environment: the operator's HOME and runtime sockets. */
  operatorEnv: Readonly<Record<string, string | undefined>>;
  config: SandboxConfig;
}

export interface SandboxPlan {
  /** bwrap's arguments up to `--`: with a terminal (PTY, tmux pane) or without (pipes). */
  argv(options: { terminal: boolean }): string[];
  /** Paths left out because they do not exist. */
  skipped: string[];
}

/** The main repository's git dir of a worktree (outside it, and written by every commit). */
function gitCommonDir(cwd: string): string | undefined {
  try {
    const out = execFileSync('git', ['-C', cwd, 'rev-parse', '--path-format=absolute', '--git-common-dir'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5000,
    }).trim();
    return out && isAbsolute(out) ? out : undefined;
  } catch {
    return undefined;
  }
}

/** Expanded paths: an engine's optional directory whose variable is unset is skipped; a configured one is an error. */
const expandAll = (
  paths: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  what: string,
  unset: 'skip' | 'throw',
) =>
  paths.flatMap((p) => {
    const path = expandPath(p.replace(/\/+$/, '') || '/', env, { unset, what });
    return path ? [path] : [];
  });

export function sandboxPlan(input: SandboxPlanInput): SandboxPlan {
  const engineDirs = input.engineWritable.map(
    (p) => expandAll([p], input.engineEnv, 'engine sandbox.writable path', 'skip')[0],
  );
  // A directory the engine writes must exist before it is bound (a read-only / cannot make it).
  input.engineWritable.forEach((raw, i) => {
    const path = engineDirs[i];
    if (path && raw.endsWith('/')) mkdirSync(path, { recursive: true, mode: 0o700 });
  });
  const operatorHome = input.operatorEnv.HOME;
  const engineHome = input.engineEnv.HOME;
  const homes = [...new Set([operatorHome, engineHome].filter((h): h is string => !!h && isAbsolute(h)))];
  const common = gitCommonDir(input.workspace);
  const writable = [
    input.workspace,
    ...(common && !common.startsWith(`${resolve(input.workspace)}/`) ? [common] : []),
    ...engineDirs.filter((d): d is string => d !== undefined),
    ...expandAll(input.config.writable, input.operatorEnv, 'sandbox.writable path', 'throw'),
  ];
  const hidden = [
    input.dataDir,
    ...(input.configPath ? [input.configPath] : []),
    ...homes.flatMap((h) => credentialPaths(h)),
    ...SYSTEM_HIDDEN_PATHS,
    ...runtimeHiddenPaths(input.operatorEnv, process.getuid?.() ?? 0),
    ...expandAll(input.config.hide, input.operatorEnv, 'sandbox.hide path', 'throw'),
  ];
  const resolver = resolverConfigDir();
  const resolved = resolveSandboxSpec({
    writable,
    readOnly: [
      input.stateDir,
      input.packageRoot,
      ...(input.binaryRoot ? [input.binaryRoot] : []),
      // /run is hidden; where /etc/resolv.conf points into it (systemd-resolved), DNS needs it.
      ...(resolver ? [resolver] : []),
    ],
    writableFiles: input.hookFiles,
    sockets: input.socketPath ? [input.socketPath] : [],
    hidden: hidden.filter((h) => !writable.includes(h)),
    // Shown in place of hidden files: in the data dir, which no engine can write.
    emptyFile: join(input.dataDir, 'sandbox-empty'),
    chdir: input.workspace,
    newSession: false,
  });
  return {
    // bwrap's --new-session guards a terminal against injected input (TIOCSTI) but takes the
    // controlling terminal away: only for engines on pipes.
    argv: ({ terminal }) => bwrapArgv({ ...resolved.spec, newSession: !terminal }),
    skipped: resolved.skipped.map((s) => s.path),
  };
}
